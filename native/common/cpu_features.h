// What the CPU and the OS support, from CPUID and XGETBV (read once per process).
// A feature counts only when the OS also saves its register state (XCR0); AMX additionally
// needs a per-process permission request on Linux (done by the kernels library).
#ifndef HYPER_PARALLEL_COMMON_CPU_FEATURES_H_
#define HYPER_PARALLEL_COMMON_CPU_FEATURES_H_

#include <span>
#include <string>
#include <string_view>

#include "common/api.h"

namespace hp {

struct HP_API CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
  bool prfchw = false;  // PREFETCHW: prefetch a line for writing (owned, not shared)

  // The comma-separated names of the features present, e.g. "avx2,fma,...".
  std::string to_string() const;
};

// Every feature by name ("avx512_vnni" ...), in a fixed order.
struct CpuFeatureField {
  std::string_view name;
  bool CpuFeatures::*member;
};
HP_API std::span<const CpuFeatureField> cpu_feature_fields() noexcept;

HP_API const CpuFeatures& cpu_features() noexcept;

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_CPU_FEATURES_H_
