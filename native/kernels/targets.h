// Kernel targets: which are installed, whether the CPU runs them, which this process uses. The
// targets and what each needs from the CPU are the SoC target table (common/soc_targets.h).
//
// A target's library is <kernels lib dir>/kernels/libhyper_parallel_kernels_<target>.so (the
// payload's vendor); "reference" is built into the front end. The selected target is chosen
// once per process: HP_KERNEL_TARGET when set, else the best target the CPU supports among
// those present. The AMX tile state is requested from Linux (arch_prctl) once per process
// before the x86_64_amx target is handed out.
#ifndef HYPER_PARALLEL_KERNELS_TARGETS_H_
#define HYPER_PARALLEL_KERNELS_TARGETS_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/cpu_features.h"
#include "common/soc_targets.h"
#include "common/status.h"
#include "kernels/kernel_table.h"

namespace hp::kernels {

// True when the CPU has every feature the target needs ("reference": always).
HP_API bool cpu_supports(std::string_view target, const CpuFeatures& cpu);

// The SoC targets whose libraries are present beside this library, best first.
HP_API std::vector<std::string> installed_targets();

// The table of a named target ("reference" or a SoC target). UNSUPPORTED for an unknown name,
// ISA_UNSUPPORTED when the CPU lacks what it needs, NOT_FOUND when its library is absent,
// CORRUPT_DATA for a library with a bad table. Loaded once and kept.
HP_API Status load_target(std::string_view name, const KernelTable** table);

// The table of a target library at `path` (tests, user-built vendors). The CPU check is the
// caller's business: `requires_target` names whose requirements to check ("" for none).
HP_API Status load_target_library(const std::string& path, std::string_view requires_target,
                                  const KernelTable** table);

// The process's target (HP_KERNEL_TARGET or the best supported; cached after the first call).
HP_API Status selected_target(const KernelTable** table);

// Asks Linux for the AMX tile state once per process (thread-safe); the result is cached.
HP_API Status request_amx_permission();

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_TARGETS_H_
