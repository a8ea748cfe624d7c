// hp::ops::find: the ops of the op packages on the search path, resolved to their entry points.
//
// An op package is a directory with an ops.json (written by the custom_ops build: its ops,
// symbols, targets and library; docs/ops.md) and the op library it names. The search path is
// the payload's own package (the custom_ops slice this library is part of), then every
// directory of HP_VENDOR_PATH (colon-separated), read once, at first use. find() returns the
// op from the first package that has it. A package whose ops.json does not parse, or whose
// library is not the one it describes, is an error of every lookup that reaches it
// (CORRUPT_DATA naming the file), never skipped: an op is not silently taken from a later one.
#ifndef HYPER_PARALLEL_OPS_OP_LOOKUP_H_
#define HYPER_PARALLEL_OPS_OP_LOOKUP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/status.h"

namespace hp::ops {

// One package of the search path, as its ops.json describes it.
struct OpPackage {
  std::string dir;     // the package directory
  std::string origin;  // "payload" or "HP_VENDOR_PATH"
  std::string version;
  std::string library;               // the op library's path
  std::string registry_sha256;       // the registry the selection was made from
  std::vector<std::string> targets;  // the SoC targets its kernels were built for
  std::vector<std::string> ops;      // in registry order
  Status status;                     // not OK: the package is unusable (why)
};

// An op resolved in a package: cast its entry points to the op's prototypes of
// hyper_parallel_op_api.h (e.g. entry.workspace_fn<decltype(&hpDispatchLayoutGetWorkspaceSize)>()).
struct OpEntry {
  std::uint32_t size = sizeof(OpEntry);
  std::uint32_t version = 1;
  std::string name, family, variant;  // family and variant empty outside a family
  std::string package;                // the package directory it was found in
  std::string library;
  std::vector<std::string> socs;
  void* get_workspace_size = nullptr;
  void* execute = nullptr;
  void* handle = nullptr;  // the library's dlopen handle (kept open for the process)

  template <typename F>
  F workspace_fn() const {
    return reinterpret_cast<F>(get_workspace_size);
  }
  template <typename F>
  F execute_fn() const {
    return reinterpret_cast<F>(execute);
  }
};

// The op named `op` (a registry name, e.g. "fused_deep_moe"), or NOT_FOUND naming the op and
// every package searched; CORRUPT_DATA / NOT_FOUND for a package that cannot be read or loaded.
HP_API Status find(std::string_view op, OpEntry* out);
// Another symbol of the package an op was found in (an object's create/destroy, say).
HP_API Status find_symbol(const OpEntry& entry, std::string_view symbol, void** out);
// The search path's packages in search order (each read, none loaded).
HP_API std::vector<OpPackage> packages();
// One package directory's ops.json, read and checked (nothing loaded): NOT_FOUND without one,
// CORRUPT_DATA naming the field for one that is not of format 1.
HP_API Status read_package(const std::string& dir, OpPackage* out);
// The search path: the payload's package (if this library is in one), then HP_VENDOR_PATH.
HP_API std::vector<std::string> search_path();

}  // namespace hp::ops

#endif  // HYPER_PARALLEL_OPS_OP_LOOKUP_H_
