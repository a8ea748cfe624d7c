// The SoC (kernel) targets and the CPU features each needs, narrowest first: the C++ view of
// native/common/soc_targets.tsv, the one table of them (generated into the build tree at
// configure time). Only targets whose kernels are built here (kind cpu) are listed; the
// kernels library orders them best first where it picks one.
#ifndef HYPER_PARALLEL_COMMON_SOC_TARGETS_H_
#define HYPER_PARALLEL_COMMON_SOC_TARGETS_H_

#include <span>
#include <string_view>

#include "common/api.h"
#include "common/cpu_features.h"

namespace hp {

struct SocTarget {
  std::string_view name;
  std::span<const std::string_view> requires_features;  // names as in cpu_feature_fields()
};

HP_API std::span<const SocTarget> soc_targets() noexcept;

// The target called `name`, or nullptr.
HP_API const SocTarget* find_soc_target(std::string_view name) noexcept;

// The features of `target` that `cpu` lacks, comma-separated ("" when it has them all).
HP_API std::string missing_cpu_features(const SocTarget& target, const CpuFeatures& cpu);

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_SOC_TARGETS_H_
