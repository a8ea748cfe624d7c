#include "common/cpu_features.h"

#include <cpuid.h>

#include <cstdint>

namespace hp {
namespace {

std::uint64_t xgetbv0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (std::uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & (1u << 27);
  const bool fma = ecx & (1u << 12), f16c = ecx & (1u << 29), avx = ecx & (1u << 28);
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;         // XTILECFG and XTILEDATA

  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  f.avx2 = os_avx && avx && (ebx & (1u << 5));
  f.fma = os_avx && fma;
  f.f16c = os_avx && f16c;
  f.avx512f = os_avx512 && (ebx & (1u << 16));
  f.avx512dq = f.avx512f && (ebx & (1u << 17));
  f.avx512bw = f.avx512f && (ebx & (1u << 30));
  f.avx512vl = f.avx512f && (ebx & (1u << 31));
  f.avx512_vnni = f.avx512f && (ecx & (1u << 11));
  f.avx512_fp16 = f.avx512f && (edx & (1u << 23));
  f.amx_bf16 = os_amx && (edx & (1u << 22));
  f.amx_tile = os_amx && (edx & (1u << 24));
  f.amx_int8 = os_amx && (edx & (1u << 25));
  unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;
  if (__get_cpuid_count(7, 1, &eax1, &ebx1, &ecx1, &edx1)) {
    f.avx512_bf16 = f.avx512f && (eax1 & (1u << 5));
  }
  if (__get_cpuid(0x80000001u, &eax1, &ebx1, &ecx1, &edx1)) f.prfchw = ecx1 & (1u << 8);
  return f;
}

}  // namespace

constexpr CpuFeatureField kFields[] = {
    {"avx2", &CpuFeatures::avx2},
    {"fma", &CpuFeatures::fma},
    {"f16c", &CpuFeatures::f16c},
    {"avx512f", &CpuFeatures::avx512f},
    {"avx512bw", &CpuFeatures::avx512bw},
    {"avx512vl", &CpuFeatures::avx512vl},
    {"avx512dq", &CpuFeatures::avx512dq},
    {"avx512_vnni", &CpuFeatures::avx512_vnni},
    {"avx512_bf16", &CpuFeatures::avx512_bf16},
    {"avx512_fp16", &CpuFeatures::avx512_fp16},
    {"amx_tile", &CpuFeatures::amx_tile},
    {"amx_int8", &CpuFeatures::amx_int8},
    {"amx_bf16", &CpuFeatures::amx_bf16},
    {"prfchw", &CpuFeatures::prfchw},
};

std::span<const CpuFeatureField> cpu_feature_fields() noexcept { return kFields; }

std::string CpuFeatures::to_string() const {
  std::string out;
  for (const auto& field : kFields) {
    if (!(this->*field.member)) continue;
    if (!out.empty()) out += ',';
    out += field.name;
  }
  return out;
}

const CpuFeatures& cpu_features() noexcept {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace hp
