#include "kernels/targets.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "common/logging.h"
#include "common/settings.h"
#include "kernels/reference/reference.h"

namespace hp::kernels {
namespace {

// "a,b,c": every SoC target, as --soc-list takes them.
std::string soc_target_names() {
  std::string out;
  for (const SocTarget& t : soc_targets()) out += (out.empty() ? "" : ",") + std::string(t.name);
  return out;
}

// The SoC targets, best first (the table lists them narrowest first).
std::vector<const SocTarget*> best_first() {
  std::vector<const SocTarget*> out;
  for (const SocTarget& t : soc_targets()) out.insert(out.begin(), &t);
  return out;
}

// The directory of this library (the payload's multicore/lib).
std::filesystem::path library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&library_dir), &info) == 0 || !info.dli_fname) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

std::filesystem::path target_library_path(std::string_view name) {
  return library_dir() / "kernels" / ("libhyper_parallel_kernels_" + std::string(name) + ".so");
}

Status check_table(const KernelTable* t, const std::string& path, std::string_view expected_name) {
  if (!t)
    return Status::error(ErrorCode::kCorruptData, "{}: hp_kernel_table() returned null", path);
  if (t->version != kKernelTableVersion || t->size < sizeof(KernelTable)) {
    return Status::error(
        ErrorCode::kCorruptData,
        "{}: kernel table version {} (size {}) but this front end needs version {} "
        "(size >= {}); rebuild the payload: ./build.sh",
        path, t->version, t->size, kKernelTableVersion, sizeof(KernelTable));
  }
  if (!expected_name.empty() && (t->target == nullptr || t->target != expected_name)) {
    return Status::error(ErrorCode::kCorruptData,
                         "{}: the library says it is target '{}', expected '{}'", path,
                         t->target ? t->target : "(null)", expected_name);
  }
  return Status::ok();
}

struct Loaded {
  std::mutex mutex;
  std::map<std::string, const KernelTable*, std::less<>> by_path;
};
Loaded& loaded() {
  static Loaded* l = new Loaded;  // never destroyed: tables stay valid until exit
  return *l;
}

Status open_library(const std::string& path, std::string_view expected_name,
                    const KernelTable** table) {
  Loaded& l = loaded();
  std::lock_guard lock(l.mutex);
  if (auto it = l.by_path.find(path); it != l.by_path.end()) {
    *table = it->second;
    return Status::ok();
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    return Status::error(ErrorCode::kNotFound, "loading kernel library {} failed: {}", path,
                         dlerror());
  }
  auto fn = reinterpret_cast<HpKernelTableFn>(dlsym(handle, "hp_kernel_table"));
  if (!fn) {
    dlclose(handle);
    return Status::error(ErrorCode::kCorruptData, "{} does not export hp_kernel_table", path);
  }
  const KernelTable* t = fn();
  Status s = check_table(t, path, expected_name);
  if (!s.is_ok()) {
    dlclose(handle);
    return s;
  }
  l.by_path.emplace(path, t);
  *table = t;
  return Status::ok();
}

Status check_cpu(std::string_view target) {
  const SocTarget* info = find_soc_target(target);
  if (!info) return Status::ok();
  const std::string missing = missing_cpu_features(*info, cpu_features());
  if (!missing.empty()) {
    return Status::error(
        ErrorCode::kIsaUnsupported,
        "kernel target {} needs CPU features this CPU lacks ({}); it has: {}. Pick another "
        "with HP_KERNEL_TARGET=auto",
        target, missing, cpu_features().to_string());
  }
  if (target == "x86_64_amx") return request_amx_permission();
  return Status::ok();
}

}  // namespace

bool cpu_supports(std::string_view target, const CpuFeatures& cpu) {
  if (target == "reference") return true;
  const SocTarget* info = find_soc_target(target);
  return info != nullptr && missing_cpu_features(*info, cpu).empty();
}

std::vector<std::string> installed_targets() {
  std::vector<std::string> out;
  for (const SocTarget* t : best_first()) {
    std::error_code ec;
    if (std::filesystem::exists(target_library_path(t->name), ec)) out.emplace_back(t->name);
  }
  return out;
}

Status request_amx_permission() {
  static const Status status = [] {
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXFeatureXtileData = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXFeatureXtileData) != 0) {
      const int err = errno;
      struct utsname host {};
      uname(&host);
      return Status::error(ErrorCode::kIsaUnsupported,
                           "CPUID reports AMX, but Linux refused the AMX tile state (arch_prctl "
                           "ARCH_REQ_XCOMP_PERM: {}). Check that the kernel is 5.16 or newer (this "
                           "one is {}), that no seccomp profile (a container runtime's) blocks "
                           "arch_prctl, and (for ENOSPC) that no thread's sigaltstack is too small "
                           "for the tile state; or run without AMX: HP_KERNEL_TARGET=x86_64_v4",
                           std::strerror(err), host.release);
    }
    return Status::ok();
  }();
  return status;
}

Status load_target(std::string_view name, const KernelTable** table) {
  if (name == "reference") {
    *table = reference_kernel_table();
    return Status::ok();
  }
  if (!find_soc_target(name)) {
    return Status::error(ErrorCode::kUnsupported,
                         "unknown kernel target '{}': expected reference or one of {}", name,
                         soc_target_names());
  }
  HP_RETURN_IF_ERROR(check_cpu(name));
  const std::filesystem::path path = target_library_path(name);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::error(
        ErrorCode::kNotFound,
        "kernel target {} is not in this payload ({} is missing); build it: ./build.sh "
        "--soc-list {}",
        name, path.string(), name);
  }
  return open_library(path.string(), name, table);
}

Status load_target_library(const std::string& path, std::string_view requires_target,
                           const KernelTable** table) {
  if (!requires_target.empty()) HP_RETURN_IF_ERROR(check_cpu(requires_target));
  return open_library(path, "", table);
}

Status selected_target(const KernelTable** table) {
  struct Choice {
    Status status;
    const KernelTable* table = nullptr;
  };
  static const Choice choice = [] {
    Choice c;
    if (!settings_status().is_ok()) {
      c.status = settings_status();
      return c;
    }
    const std::string& want = settings().kernel_target;
    if (want != "auto") {
      c.status = load_target(want, &c.table);
      c.status.with_context("HP_KERNEL_TARGET");
      return c;
    }
    const std::vector<std::string> present = installed_targets();
    for (const std::string& name : present) {
      if (!cpu_supports(name, cpu_features())) continue;
      c.status = load_target(name, &c.table);
      if (c.status.is_ok()) {
        HP_LOG_DEBUG("kernels: selected target {}", name);
        return c;
      }
      HP_LOG_WARN("kernels: target {} is not usable ({}); trying the next", name,
                  c.status.to_string());
    }
    std::string list;
    for (const std::string& name : present) list += (list.empty() ? "" : ",") + name;
    c.status =
        Status::error(ErrorCode::kIsaUnsupported,
                      "none of this payload's kernel targets ({}) runs on this CPU (it has: {}); "
                      "rebuild with a target it supports: ./build.sh --soc-list {}",
                      list.empty() ? "none" : list, cpu_features().to_string(), soc_target_names());
    return c;
  }();
  *table = choice.table;
  return choice.status;
}

}  // namespace hp::kernels
