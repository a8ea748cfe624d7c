// bfloat16 <-> float, bit-exact and shared by every kernel target and the reference.
// Rounding to bf16 is round-to-nearest-even; NaN stays a quiet NaN of the same sign.
#ifndef HYPER_PARALLEL_COMMON_BFLOAT16_H_
#define HYPER_PARALLEL_COMMON_BFLOAT16_H_

#include <bit>
#include <cstdint>

namespace hp {

inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(std::uint32_t(b) << 16);
}

inline std::uint16_t float_to_bf16(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return std::uint16_t((bits >> 16) | 0x0040u);  // quiet NaN
  }
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return std::uint16_t((bits + rounding) >> 16);
}

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_BFLOAT16_H_
