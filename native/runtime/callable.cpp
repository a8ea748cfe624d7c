#include "runtime/callable.h"

#include <dlfcn.h>

#include <fstream>
#include <iterator>

namespace hp::runtime {
namespace {

void update_u64(Sha256& hash, std::uint64_t value) {
  std::byte bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
  hash.update(std::span<const std::byte>(bytes, 8));
}

Status read_file_bytes(const std::string& path, std::vector<std::byte>* out) {
  std::ifstream in(path, std::ios::binary);
  HP_ENSURE(in.good(), ErrorCode::kIoError,
            "cannot read {} for its identity bytes; pass the identity explicitly", path);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  HP_ENSURE(!in.bad(), ErrorCode::kIoError, "reading {} for its identity bytes failed", path);
  out->resize(chars.size());
  if (!chars.empty()) std::memcpy(out->data(), chars.data(), chars.size());
  return Status::ok();
}

}  // namespace

std::string_view to_string(CallableKind kind) noexcept {
  return kind == CallableKind::kFunction ? "function" : "library_symbol";
}

void Callable::compute_handle() {
  Sha256 hash;
  hash.update(std::string_view("hp.runtime.callable.v1\0", 23));
  hash.update(to_string(kind_));
  hash.update(std::string_view("\0", 1));
  update_u64(hash, name_space_.size());
  hash.update(name_space_);
  update_u64(hash, identity_.size());
  hash.update(identity_);
  handle_.digest = hash.finish();
}

Callable Callable::from_function(std::string name, TaskFunction function,
                                 std::span<const std::byte> identity, std::string name_space) {
  Callable c;
  c.name_ = std::move(name);
  c.kind_ = CallableKind::kFunction;
  c.name_space_ = std::move(name_space);
  c.identity_.assign(identity.begin(), identity.end());
  c.function_ = std::move(function);
  c.compute_handle();
  return c;
}

Callable Callable::from_function(std::string name, TaskFunction function, std::string_view identity,
                                 std::string name_space) {
  return from_function(std::move(name), std::move(function), std::as_bytes(std::span(identity)),
                       std::move(name_space));
}

Status Callable::from_library(const std::string& library_path, const std::string& symbol,
                              Callable* out, std::string name_space,
                              std::span<const std::byte> identity) {
  HP_ENSURE(!symbol.empty(), ErrorCode::kInvalidArgument,
            "Callable::from_library({}): the symbol name is empty", library_path);
  void* handle = ::dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const std::string why = ::dlerror() ?: "unknown dlopen error";
    if (why.find("undefined symbol") != std::string::npos) {
      // Loaded with RTLD_NOW: a reference nothing defines fails here, not when a task runs.
      return Status::error(ErrorCode::kNotFound,
                           "kernel library {} cannot be loaded: {}; it uses a symbol no loaded "
                           "library defines: link it against the library that defines it (ldd "
                           "-r {} lists every unresolved symbol), or define it",
                           library_path, why, library_path);
    }
    return Status::error(ErrorCode::kNotFound,
                         "cannot load kernel library {}: {}; check the path (and the library's "
                         "own dependencies with ldd)",
                         library_path, why);
  }
  std::shared_ptr<void> library(handle, [](void* h) { ::dlclose(h); });
  ::dlerror();  // clear, so that a null symbol value is told apart from a missing symbol
  void* entry = ::dlsym(handle, symbol.c_str());
  if (const char* why = ::dlerror(); why != nullptr || entry == nullptr) {
    return Status::error(ErrorCode::kNotFound,
                         "kernel library {} has no symbol '{}' ({}); export it as extern \"C\" "
                         "hp::Status {}(const hp::runtime::TaskArgs&, hp::platform::BlockContext&) "
                         "with default visibility",
                         library_path, symbol, why ? why : "null symbol", symbol);
  }
  Callable c;
  c.name_ = symbol;
  c.library_path_ = library_path;
  c.kind_ = CallableKind::kLibrarySymbol;
  c.name_space_ = std::move(name_space);
  if (identity.empty()) {
    HP_RETURN_IF_ERROR(read_file_bytes(library_path, &c.identity_));
    c.identity_.push_back(std::byte{0});
    const auto name_bytes = std::as_bytes(std::span(symbol));
    c.identity_.insert(c.identity_.end(), name_bytes.begin(), name_bytes.end());
  } else {
    c.identity_.assign(identity.begin(), identity.end());
  }
  const auto kernel = reinterpret_cast<KernelEntry>(entry);
  // The function holds the library too: copies of it (in queued tasks) outlive the Callable.
  c.function_ = [kernel, library](const TaskArgs& args, platform::BlockContext& block) {
    return kernel(args, block);
  };
  c.library_ = std::move(library);
  c.compute_handle();
  *out = std::move(c);
  return Status::ok();
}

}  // namespace hp::runtime
