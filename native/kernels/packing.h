// Packing weights into the format of packed_weights.h, once, before any GEMM uses them (the
// MoE layer packs when it loads its weights and keeps the result), and unpacking (round trip).
#ifndef HYPER_PARALLEL_KERNELS_PACKING_H_
#define HYPER_PARALLEL_KERNELS_PACKING_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "kernels/packed_weights.h"

namespace hp::kernels {

// The largest K: int32 accumulators of biased u8 x s8 products cannot overflow below it.
inline constexpr std::int64_t kMaxGemmK = 65536;

struct PackOptions {
  WeightType type = WeightType::kInt8;
  PackLayout layout = PackLayout::kPlain;
  std::int64_t group_size = 0;  // K rows per scale group: 0 (or >= K) = per output channel;
                                // otherwise a multiple of 64
};

class PackedWeights;

// weights: int8 [E, K, N], any strides (int4: values in [-8, 7]); scales: fp32 [E, N] with one
// group, [E, G, N] with G = ceil(K / group_size) groups; finite. kSwigluHalves needs an even N.
HP_API Status pack_weights(const TensorView& weights, const TensorView& scales,
                           const PackOptions& options, PackedWeights* out);

class HP_API PackedWeights {
 public:
  PackedWeights() = default;
  const PackedWeightsHeader* header() const {
    return reinterpret_cast<const PackedWeightsHeader*>(buffer_.get());
  }
  bool empty() const { return buffer_ == nullptr; }
  std::size_t bytes() const { return empty() ? 0 : header()->total_bytes; }

 private:
  friend Status pack_weights(const TensorView&, const TensorView&, const PackOptions&,
                             PackedWeights*);
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> buffer_;
};

// The inverse of pack_weights: weights int8 [E, K, N] and scales fp32 [E, G, N] (or [E, N]).
HP_API Status unpack_weights(const PackedWeightsHeader& packed, const TensorView& weights,
                             const TensorView& scales);

// Checks a packed buffer's header (magic, version, sizes) before a kernel trusts it.
HP_API Status validate_packed(const PackedWeightsHeader* packed);

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_PACKING_H_
