// The packed weight format shared by every kernel target (format version 1).
//
// A packed buffer is one 64-byte aligned allocation: this header, then the weights of every
// expert, then the scales. Weights W[e][k][n] (int8, or int4 values in [-8, 7]) are stored
//   data[e][cb][k4][16][4]   cb: block of 16 packed columns, k4: group of 4 K rows,
// i.e. for each block of 16 columns, rows of 64 elements (16 columns x 4 consecutive k),
// which is at once the VNNI operand (one zmm per k4) and the AMX B tile (16 k4 rows x 64 B).
// K is padded to a multiple of 64 and each column segment to a multiple of 16, with zero
// weights. Values are stored biased to unsigned: int8 as b + 128, int4 as the nibble b + 8
// (the kernels use u8 x s8 dot products and subtract bias * sum_k a[r][k]). An int4 row of 64
// elements is 32 bytes: byte j holds element j in its low nibble and element j + 32 in its high
// nibble.
// Column segments: PackLayout::kPlain has one segment [0, N); kSwigluHalves (GMM1, N = 2I)
// has two, gate [0, I) and up [I, 2I), each padded on its own so that gate block j and up
// block j hold the same h columns.
// Scales: float scales[e][g][packed column], g over K groups of group_size rows (one group:
// per-output-channel scales); 0 for padding columns.
#ifndef HYPER_PARALLEL_KERNELS_PACKED_WEIGHTS_H_
#define HYPER_PARALLEL_KERNELS_PACKED_WEIGHTS_H_

#include <cstdint>

namespace hp::kernels {

inline constexpr std::uint32_t kPackedMagic = 0x574B5048;  // "HPKW"
inline constexpr std::uint32_t kPackedFormatVersion = 1;
inline constexpr std::int64_t kPackK = 64;     // K padding (one AMX tile row of bytes)
inline constexpr std::int64_t kPackCols = 16;  // columns per block

enum class WeightType : std::int32_t { kInt8 = 0, kInt4 = 1 };
enum class PackLayout : std::int32_t { kPlain = 0, kSwigluHalves = 1 };

struct PackedWeightsHeader {
  std::uint32_t magic;           // kPackedMagic
  std::uint32_t format_version;  // kPackedFormatVersion
  WeightType type;
  PackLayout layout;
  std::int32_t bias;  // 128 (int8) or 8 (int4)
  std::int32_t reserved;
  std::int64_t experts, k, n;
  std::int64_t k_pad;          // multiple of kPackK
  std::int64_t segment_n;      // columns of one segment (n, or n / 2 with kSwigluHalves)
  std::int64_t segment_pad;    // segment_n rounded up to kPackCols
  std::int64_t n_pad;          // packed columns: segments * segment_pad
  std::int64_t group_size;     // K rows per scale group (a multiple of kPackK, or k)
  std::int64_t groups;         // ceil(k / group_size)
  std::int64_t row_bytes;      // bytes of one 64-element row: 64 (int8) or 32 (int4)
  std::uint64_t expert_bytes;  // bytes of one expert's weights
  std::uint64_t data_offset;   // from the header's first byte
  std::uint64_t scales_offset;
  std::uint64_t total_bytes;

  const std::uint8_t* data(std::int64_t e) const {
    return reinterpret_cast<const std::uint8_t*>(this) + data_offset +
           std::uint64_t(e) * expert_bytes;
  }
  // Column block cb (of 16 packed columns) of expert e, starting at K row k (a multiple of 4).
  const std::uint8_t* block(std::int64_t e, std::int64_t cb, std::int64_t k) const {
    return data(e) + std::uint64_t(cb * (k_pad / 4) + k / 4) * std::uint64_t(row_bytes);
  }
  const float* scales(std::int64_t e, std::int64_t g) const {
    return reinterpret_cast<const float*>(reinterpret_cast<const std::uint8_t*>(this) +
                                          scales_offset) +
           (e * groups + g) * n_pad;
  }
  std::int64_t segments() const { return layout == PackLayout::kSwigluHalves ? 2 : 1; }
  // The packed column of logical column c.
  std::int64_t packed_column(std::int64_t c) const {
    return c < segment_n ? c : segment_pad + (c - segment_n);
  }
  // The weight at K row k and packed column p of expert e (unbiased), read element by element.
  int value(std::int64_t e, std::int64_t k, std::int64_t p) const {
    const std::uint8_t* row = block(e, p / kPackCols, k - k % 4);
    const int i = int(p % kPackCols) * 4 + int(k % 4);
    if (type == WeightType::kInt8) return int(row[i]) - bias;
    const std::uint8_t byte = row[i % 32];
    return int(i < 32 ? byte & 15 : byte >> 4) - bias;
  }
};

}  // namespace hp::kernels

#endif  // HYPER_PARALLEL_KERNELS_PACKED_WEIGHTS_H_
