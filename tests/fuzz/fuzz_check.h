// What every fuzz target of tests/fuzz shares: a failed expectation ends the run the way a
// sanitizer report does (the input is kept as a crash artifact), with the reason on stderr.
#ifndef HYPER_PARALLEL_TESTS_FUZZ_FUZZ_CHECK_H_
#define HYPER_PARALLEL_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hp::fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz expectation failed: %s\n", what.c_str());
  std::abort();
}

// A status the surface may return for a bad input: OK or one of `allowed`, never another code
// (an INTERNAL or a SYSTEM_ERROR on bad input is a bug), and never an error without a message.
inline void expect_status(const Status& s, std::initializer_list<ErrorCode> allowed,
                          const char* call) {
  if (s.is_ok()) return;
  for (ErrorCode code : allowed) {
    if (s.code() == code) {
      if (s.message().empty()) fail(std::string(call) + ": an error without a message");
      return;
    }
  }
  fail(std::string(call) + " returned an unexpected code: " + s.to_string());
}

// A directory of this process for the files a target writes (made once, under TMPDIR).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/hp-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) fail("cannot make a scratch directory under TMPDIR");
    return pattern;
  }();
  return dir;
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out.good()) fail("cannot write " + path);
}

}  // namespace hp::fuzz

#endif  // HYPER_PARALLEL_TESTS_FUZZ_FUZZ_CHECK_H_
