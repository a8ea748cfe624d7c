// A std::source_location naming a Python file and line, so that a scope opened from Python
// carries its Python call site (scope_stats.jsonl "site", swimlane scope rows) instead of this
// binding's.
//
// std::source_location has no public constructor from values. In libstdc++ (GCC 12) it is one
// pointer to a struct { const char* file; const char* function; unsigned line; unsigned column; }
// that current() fills from __builtin_source_location(); we point one at our own struct of that
// layout (checked by the static_asserts below). Sites are interned: their strings and structs
// live as long as the process, as the compiler's own do. Another standard library falls back to
// the binding's own location.
#ifndef HYPER_PARALLEL_PYTHON_BINDINGS_SOURCE_SITE_H_
#define HYPER_PARALLEL_PYTHON_BINDINGS_SOURCE_SITE_H_

#include <bit>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>

namespace hp::python {

inline std::source_location source_site(const std::string& file, std::uint32_t line) {
#if defined(__GLIBCXX__)
  struct SiteLayout {
    const char* file_name;
    const char* function_name;
    unsigned line;
    unsigned column;
  };
  static_assert(sizeof(std::source_location) == sizeof(const SiteLayout*) &&
                std::is_trivially_copyable_v<std::source_location>);
  static std::mutex mutex;
  static auto& sites = *new std::map<std::pair<std::string, std::uint32_t>, SiteLayout>();
  static auto& files = *new std::deque<std::string>();  // stable addresses
  std::lock_guard lock(mutex);
  auto it = sites.find({file, line});
  if (it == sites.end()) {
    const char* name = files.emplace_back(file).c_str();
    it = sites.emplace(std::pair{file, line}, SiteLayout{name, "", line, 0}).first;
  }
  const SiteLayout* site = &it->second;  // std::map nodes never move
  const std::source_location located = std::bit_cast<std::source_location>(site);
  if (located.line() == line && std::string_view(located.file_name()) == file) return located;
#else
  (void)file;
  (void)line;
#endif
  return std::source_location::current();
}

}  // namespace hp::python

#endif  // HYPER_PARALLEL_PYTHON_BINDINGS_SOURCE_SITE_H_
