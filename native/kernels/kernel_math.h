// Scalar math shared by the reference and every target, written so that the compiler
// vectorizes it without changing a bit of its results: the kernel libraries are built with
// -ffp-contract=off, so each target evaluates exactly these IEEE operations in this order and
// the int8 epilogues are bit-identical across targets (the tests check equality).
#ifndef HYPER_PARALLEL_KERNELS_KERNEL_MATH_H_
#define HYPER_PARALLEL_KERNELS_KERNEL_MATH_H_

#include <bit>
#include <cmath>
#include <cstdint>

namespace hp::kernels {

inline constexpr float kQuantMax = 127.0f;

// exp(x) for finite x, relative error < 2e-7 on [-87, 88] (Cephes' expf polynomial).
inline float exp_f32(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const std::int32_t biased = std::int32_t(n) + 127;
  return p * std::bit_cast<float>(biased << 23);
}

inline float silu(float g) { return g / (1.0f + exp_f32(-g)); }
inline float sigmoid(float g) { return 1.0f / (1.0f + exp_f32(-g)); }

// Round to nearest even and clamp to [-127, 127] (x finite).
inline std::int8_t quantize_value(float x) {
  float r = std::nearbyint(x);
  r = r > kQuantMax ? kQuantMax : r;
  r = r < -kQuantMax ? -kQuantMax : r;
  return std::int8_t(std::int32_t(r));
}

// The multiplier of dynamic quantisation for a row whose largest magnitude is amax.
inline float quant_multiplier(float amax) { return amax > 0.0f ? kQuantMax / amax : 0.0f; }
inline float quant_scale(float amax) { return amax / kQuantMax; }

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_KERNEL_MATH_H_
