#include "ops/op_lookup.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>

#include <fmt/ranges.h>

#include "common/json_file.h"
#include "common/settings.h"
#include "common/sha256.h"

namespace hp::ops {
namespace {

namespace fs = std::filesystem;

// One op of a package's ops.json.
struct PackageOp {
  std::string name, family, variant, get_workspace_size, execute;
  std::vector<std::string> socs;
};

struct Package {
  OpPackage info;
  std::vector<PackageOp> ops;
  std::string library_sha256;
  std::once_flag loaded;
  void* handle = nullptr;
  Status load_status;
};

// The custom_ops slice this library is installed in (its lib/ directory's parent), or empty.
fs::path own_package_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&own_package_dir), &info) == 0 ||
      info.dli_fname == nullptr)
    return {};
  std::error_code ec;
  const fs::path lib = fs::weakly_canonical(fs::path(info.dli_fname), ec);
  return (ec ? fs::path(info.dli_fname).lexically_normal() : lib).parent_path().parent_path();
}

Status string_field(const Json& j, const char* key, const std::string& where, std::string* out) {
  HP_ENSURE(j.contains(key) && j[key].is_string(), ErrorCode::kCorruptData,
            "{}: field '{}' is missing or not a string: rebuild the package "
            "(scripts/build_custom_ops.sh)",
            where, key);
  *out = j[key].get<std::string>();
  return Status::ok();
}

Status strings_field(const Json& j, const char* key, const std::string& where,
                     std::vector<std::string>* out) {
  HP_ENSURE(
      j.contains(key) && j[key].is_array(), ErrorCode::kCorruptData,
      "{}: field '{}' is missing or not a list: rebuild the package (scripts/build_custom_ops.sh)",
      where, key);
  out->clear();
  for (const Json& v : j[key]) {
    HP_ENSURE(v.is_string(), ErrorCode::kCorruptData, "{}: field '{}' holds a non-string", where,
              key);
    out->push_back(v.get<std::string>());
  }
  return Status::ok();
}

// Reads <dir>/ops.json into `out` (nothing is loaded).
Status read_package(const fs::path& dir, const std::string& origin, Package* out) {
  out->info.dir = dir.string();
  out->info.origin = origin;
  const std::string file = (dir / "ops.json").string();
  Json j;
  Status s = read_json_file(file, &j);
  if (s.code() == ErrorCode::kNotFound) {
    return Status::error(ErrorCode::kNotFound, "{} ({}) is not an op package: {} does not exist",
                         dir.string(), origin, file);
  }
  HP_RETURN_IF_ERROR(s);
  HP_ENSURE(j.is_object() && j.contains("format") && j["format"] == 1, ErrorCode::kCorruptData,
            "{}: not an ops.json of format 1: rebuild the package (scripts/build_custom_ops.sh)",
            file);
  std::string library;
  HP_RETURN_IF_ERROR(string_field(j, "library", file, &library));
  const fs::path inside = fs::path(library).lexically_normal();
  HP_ENSURE(inside.is_relative() && inside.has_filename() && inside.filename() != "." &&
                *inside.begin() != "..",
            ErrorCode::kCorruptData,
            "{}: field 'library' = '{}': expected a path inside the package, relative to it", file,
            library);
  out->info.library = (dir / library).lexically_normal().string();
  HP_RETURN_IF_ERROR(string_field(j, "library_sha256", file, &out->library_sha256));
  HP_RETURN_IF_ERROR(string_field(j, "registry_sha256", file, &out->info.registry_sha256));
  HP_RETURN_IF_ERROR(string_field(j, "version", file, &out->info.version));
  HP_RETURN_IF_ERROR(strings_field(j, "targets", file, &out->info.targets));
  HP_ENSURE(j.contains("ops") && j["ops"].is_array(), ErrorCode::kCorruptData,
            "{}: field 'ops' is not a list", file);
  for (const Json& o : j["ops"]) {
    HP_ENSURE(o.is_object(), ErrorCode::kCorruptData, "{}: an entry of 'ops' is not an object",
              file);
    PackageOp op;
    const std::string where = fmt::format("{}: an op", file);
    HP_RETURN_IF_ERROR(string_field(o, "name", where, &op.name));
    const std::string at = fmt::format("{}: op '{}'", file, op.name);
    HP_RETURN_IF_ERROR(string_field(o, "get_workspace_size", at, &op.get_workspace_size));
    HP_RETURN_IF_ERROR(string_field(o, "execute", at, &op.execute));
    HP_RETURN_IF_ERROR(strings_field(o, "socs", at, &op.socs));
    for (const char* key : {"family", "variant"}) {
      HP_ENSURE(o.contains(key) && (o[key].is_null() || o[key].is_string()),
                ErrorCode::kCorruptData, "{}: field '{}' is missing or not a string or null", at,
                key);
    }
    if (o["family"].is_string()) op.family = o["family"].get<std::string>();
    if (o["variant"].is_string()) op.variant = o["variant"].get<std::string>();
    out->info.ops.push_back(op.name);
    out->ops.push_back(std::move(op));
  }
  return Status::ok();
}

// The path with symlinks and dot entries resolved where it exists; the path itself otherwise.
fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

struct SearchPath {
  std::vector<std::string> dirs;
  std::vector<std::unique_ptr<Package>> packages;
};

const SearchPath& search() {
  static const SearchPath path = [] {
    SearchPath p;
    std::vector<std::pair<fs::path, std::string>> dirs;
    const fs::path own = own_package_dir();
    if (!own.empty() && fs::exists(own / "ops.json")) dirs.emplace_back(own, "payload");
    // A directory already on the path (the activation puts the payload's package first in
    // HP_VENDOR_PATH too) is searched once, where it first appears.
    std::set<fs::path> seen;
    for (const auto& [dir, origin] : dirs) seen.insert(canonical_or_self(dir));
    for (const std::string& d : hp::settings().vendor_path) {
      if (seen.insert(canonical_or_self(fs::absolute(d))).second)
        dirs.emplace_back(fs::absolute(d), "HP_VENDOR_PATH");
    }
    for (auto& [dir, origin] : dirs) {
      auto pkg = std::make_unique<Package>();
      pkg->info.status = read_package(dir, origin, pkg.get());
      p.dirs.push_back(dir.string());
      p.packages.push_back(std::move(pkg));
    }
    return p;
  }();
  return path;
}

std::string file_sha256(const std::string& path, Status* status) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *status = Status::error(ErrorCode::kNotFound, "{}: cannot be opened", path);
    return {};
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return to_hex(sha256(std::string_view(bytes)));
}

// Every op library links the MoE layer (libhyper_parallel_moe.so and, through its RUNPATH, the
// symmetric-memory and core libraries). A package outside the payload cannot find them by its
// own RUNPATH: the payload's are loaded first, and its NEEDED entries then resolve to them by
// SONAME. Not loading them leaves the dlopen's error to name what is missing.
void load_payload_layer() {
  static std::once_flag once;
  std::call_once(once, [] {
    const fs::path own = own_package_dir();
    if (own.empty()) return;
    const fs::path moe = own.parent_path() / "multicore" / "lib" / "libhyper_parallel_moe.so";
    if (fs::exists(moe)) (void)dlopen(moe.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept for the process
  });
}

// dlopens the package's library once, after checking it is the one its ops.json describes.
Status load(Package& p) {
  std::call_once(p.loaded, [&] {
    load_payload_layer();
    Status read;
    const std::string digest = file_sha256(p.info.library, &read);
    if (!read.is_ok()) {
      p.load_status = read;
      return;
    }
    if (digest != p.library_sha256) {
      p.load_status = Status::error(
          ErrorCode::kCorruptData,
          "{}: the library is not the one {}/ops.json describes (sha256 {}, expected {}): "
          "rebuild the package (scripts/build_custom_ops.sh)",
          p.info.library, p.info.dir, digest, p.library_sha256);
      return;
    }
    p.handle = dlopen(p.info.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (p.handle == nullptr) {
      const char* why = dlerror();
      p.load_status = Status::error(ErrorCode::kNotFound, "{}: dlopen failed: {}", p.info.library,
                                    why ? why : "(no reason)");
    }
  });
  return p.load_status;
}

Status resolve(const Package& p, const std::string& symbol, void** out) {
  dlerror();
  *out = dlsym(p.handle, symbol.c_str());
  HP_ENSURE(*out != nullptr, ErrorCode::kNotFound,
            "{}: symbol {} is not exported (ops.json names it): rebuild the "
            "package (scripts/build_custom_ops.sh)",
            p.info.library, symbol);
  return Status::ok();
}

// A vendor other than the payload's own is used only by an activated process: the activation
// sets HP_VENDOR_PATH and the CPU split before the framework starts, which is when they count.
Status require_activation(const Package& p, std::string_view op) {
  if (p.info.origin != "HP_VENDOR_PATH" || !hp::settings().activated.empty()) return Status::ok();
  const fs::path own = own_package_dir();
  const fs::path payload = own.empty() ? fs::path() : own.parent_path();
  const std::string activate =
      !payload.empty() && fs::exists(payload / "__init__.py")
          ? std::string("source \"$(command -v hyper_parallel_multicore_set_env.bash)\"")
          : fmt::format("source {}",
                        payload.empty()
                            ? std::string("<payload>/multicore/lib/set_env.bash")
                            : (payload / "multicore" / "lib" / "set_env.bash").string());
  return Status::error(
      ErrorCode::kFailedPrecondition,
      "HP-NATIVE-NOT-ACTIVATED: op '{}' is in {} (from HP_VENDOR_PATH), a vendor other than the "
      "payload's own, and this process was not activated; before starting it, run: {} {}",
      op, p.info.dir, activate, p.info.dir);
}

}  // namespace

Status find(std::string_view op, OpEntry* out) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "hp::ops::find: out is null");
  HP_RETURN_IF_ERROR(settings_status());
  const SearchPath& path = search();
  std::string searched;
  for (const auto& pkg : path.packages) {
    Package& p = *pkg;
    if (!p.info.status.is_ok()) return Status(p.info.status.code(), p.info.status.message());
    searched +=
        fmt::format("{}{} ({}: {})", searched.empty() ? "" : "; ", p.info.dir, p.info.origin,
                    p.info.ops.empty() ? std::string("no ops")
                                       : fmt::format("{}", fmt::join(p.info.ops, ", ")));
    for (const PackageOp& o : p.ops) {
      if (o.name != op) continue;
      HP_RETURN_IF_ERROR(require_activation(p, op));
      HP_RETURN_IF_ERROR(load(p));
      OpEntry e;
      e.name = o.name;
      e.family = o.family;
      e.variant = o.variant;
      e.package = p.info.dir;
      e.library = p.info.library;
      e.socs = o.socs;
      e.handle = p.handle;
      HP_RETURN_IF_ERROR(resolve(p, o.get_workspace_size, &e.get_workspace_size));
      HP_RETURN_IF_ERROR(resolve(p, o.execute, &e.execute));
      *out = std::move(e);
      return Status::ok();
    }
  }
  return Status::error(
      ErrorCode::kNotFound,
      "op '{}' is in no op package on the search path ({}); add the directory "
      "of a package that has it to HP_VENDOR_PATH, or build one: scripts/build_custom_ops.sh --ops "
      "{}",
      op,
      searched.empty() ? "no packages: the payload has none and HP_VENDOR_PATH is empty" : searched,
      op);
}

Status find_symbol(const OpEntry& entry, std::string_view symbol, void** out) {
  HP_ENSURE(out != nullptr && entry.handle != nullptr, ErrorCode::kInvalidArgument,
            "hp::ops::find_symbol: an entry from hp::ops::find and an output are required");
  for (const auto& pkg : search().packages) {
    if (pkg->handle == entry.handle) return resolve(*pkg, std::string(symbol), out);
  }
  return Status::error(ErrorCode::kInvalidArgument,
                       "hp::ops::find_symbol: the entry is not from hp::ops::find");
}

std::vector<OpPackage> packages() {
  std::vector<OpPackage> out;
  for (const auto& pkg : search().packages) out.push_back(pkg->info);
  return out;
}

std::vector<std::string> search_path() { return search().dirs; }

Status read_package(const std::string& dir, OpPackage* out) {
  HP_ENSURE(out != nullptr, ErrorCode::kInvalidArgument, "hp::ops::read_package: out is null");
  Package pkg;
  const Status s = read_package(fs::path(dir), "read_package", &pkg);
  pkg.info.status = s;
  *out = std::move(pkg.info);
  return s;
}

}  // namespace hp::ops
