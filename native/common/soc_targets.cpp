#include "common/soc_targets.h"

#include <string>

#include "soc_target_table.inc"

namespace hp {
namespace {

#define HP_SOC_FEATURES(name, ...) constexpr std::string_view k_##name[] = {__VA_ARGS__};
HP_SOC_TARGET_LIST(HP_SOC_FEATURES)
#undef HP_SOC_FEATURES

#define HP_SOC_ROW(name, ...) SocTarget{#name, k_##name},
constexpr SocTarget kTargets[] = {HP_SOC_TARGET_LIST(HP_SOC_ROW)};
#undef HP_SOC_ROW

bool has_feature(const CpuFeatures& cpu, std::string_view name) {
  for (const CpuFeatureField& f : cpu_feature_fields()) {
    if (f.name == name) return cpu.*f.member;
  }
  return false;  // a name the table has and CpuFeatures lacks: tests/common checks there is none
}

}  // namespace

std::span<const SocTarget> soc_targets() noexcept { return kTargets; }

const SocTarget* find_soc_target(std::string_view name) noexcept {
  for (const SocTarget& t : kTargets) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string missing_cpu_features(const SocTarget& target, const CpuFeatures& cpu) {
  std::string out;
  for (std::string_view f : target.requires_features) {
    if (has_feature(cpu, f)) continue;
    if (!out.empty()) out += ',';
    out += f;
  }
  return out;
}

}  // namespace hp
