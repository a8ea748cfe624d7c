#include "kernels/packing.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "kernels/tiles.h"

namespace hp::kernels {
namespace {

std::int64_t at(const TensorView& t, std::int64_t i, std::int64_t j, std::int64_t k) {
  return i * t.stride(0) + j * t.stride(1) + k * t.stride(2);
}

// The scales view as [E, G, N] strides (a 2-D [E, N] view has one group).
struct ScaleIndex {
  std::int64_t se, sg, sn;
  std::int64_t operator()(std::int64_t e, std::int64_t g, std::int64_t n) const {
    return e * se + g * sg + n * sn;
  }
};

Status check_scales(const TensorView& scales, std::int64_t e, std::int64_t groups, std::int64_t n,
                    ScaleIndex* index) {
  HP_RETURN_IF_ERROR(scales.expect_dtype("scales", DType::kFP32));
  if (scales.ndim() == 2 && groups == 1) {
    HP_RETURN_IF_ERROR(scales.expect_shape("scales", {e, n}));
    *index = {scales.stride(0), 0, scales.stride(1)};
  } else {
    HP_RETURN_IF_ERROR(scales.expect_shape("scales", {e, groups, n}));
    *index = {scales.stride(0), scales.stride(1), scales.stride(2)};
  }
  return Status::ok();
}

PackedWeightsHeader make_header(WeightType type, PackLayout layout, std::int64_t e, std::int64_t k,
                                std::int64_t n, std::int64_t group_size) {
  PackedWeightsHeader h{};
  h.magic = kPackedMagic;
  h.format_version = kPackedFormatVersion;
  h.type = type;
  h.layout = layout;
  h.bias = type == WeightType::kInt8 ? 128 : 8;
  h.experts = e;
  h.k = k;
  h.n = n;
  h.k_pad = round_up(std::max<std::int64_t>(k, 1), kPackK);
  h.segment_n = layout == PackLayout::kSwigluHalves ? n / 2 : n;
  h.segment_pad = round_up(h.segment_n, kPackCols);
  h.n_pad = h.segments() * h.segment_pad;
  h.group_size = group_size;
  h.groups = ceil_div(std::max<std::int64_t>(k, 1), group_size);
  h.row_bytes = type == WeightType::kInt8 ? 64 : 32;
  h.expert_bytes =
      std::uint64_t(h.n_pad / kPackCols) * std::uint64_t(h.k_pad / 4) * std::uint64_t(h.row_bytes);
  h.data_offset = (sizeof(PackedWeightsHeader) + 63) & ~std::uint64_t(63);
  const std::uint64_t data_bytes = h.expert_bytes * std::uint64_t(e);
  h.scales_offset = h.data_offset + ((data_bytes + 63) & ~std::uint64_t(63));
  h.total_bytes = h.scales_offset + std::uint64_t(e * h.groups * h.n_pad) * sizeof(float);
  return h;
}

}  // namespace

void PackedWeights::Free::operator()(std::byte* p) const { std::free(p); }

Status validate_packed(const PackedWeightsHeader* p) {
  if (!p)
    return Status::error(ErrorCode::kInvalidArgument,
                         "packed weights: null (pack them first: pack_weights)");
  if (p->magic != kPackedMagic || p->format_version != kPackedFormatVersion) {
    return Status::error(
        ErrorCode::kCorruptData,
        "packed weights: magic {:#x} version {} but expected {:#x} version {}: not packed "
        "by this HyperParallel (pack them again with pack_weights)",
        p->magic, p->format_version, kPackedMagic, kPackedFormatVersion);
  }
  const PackedWeightsHeader expect =
      make_header(p->type, p->layout, p->experts, p->k, p->n, p->group_size);
  if (std::memcmp(&expect, p, sizeof(expect)) != 0) {
    return Status::error(ErrorCode::kCorruptData,
                         "packed weights: the header's sizes are inconsistent "
                         "(E={} K={} N={}); pack the weights again",
                         p->experts, p->k, p->n);
  }
  return Status::ok();
}

Status pack_weights(const TensorView& w, const TensorView& scales, const PackOptions& options,
                    PackedWeights* out) {
  HP_RETURN_IF_ERROR(w.expect_dtype("weights", DType::kInt8));
  HP_RETURN_IF_ERROR(w.expect_shape("weights", {-1, -1, -1}));
  const std::int64_t e = w.dim(0), k = w.dim(1), n = w.dim(2);
  if (e < 1 || k < 1 || n < 1) {
    return Status::error(ErrorCode::kShapeMismatch,
                         "weights {}: every dimension must be at least 1", w.to_string());
  }
  if (k > kMaxGemmK) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "weights {}: K = {} exceeds the largest supported K ({})", w.to_string(),
                         k, kMaxGemmK);
  }
  if (options.layout == PackLayout::kSwigluHalves && n % 2 != 0) {
    return Status::error(
        ErrorCode::kShapeMismatch,
        "weights {}: the SwiGLU layout needs N = 2 x intermediate (gate, then up); N = {} is odd",
        w.to_string(), n);
  }
  std::int64_t group_size = options.group_size;
  if (group_size < 0 || (group_size > 0 && group_size < k && group_size % kPackK != 0)) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "group_size {}: expected 0 (per output channel) or a multiple of {}",
                         group_size, kPackK);
  }
  if (group_size == 0 || group_size >= k) group_size = k;
  const PackedWeightsHeader h = make_header(options.type, options.layout, e, k, n, group_size);
  ScaleIndex si{};
  HP_RETURN_IF_ERROR(check_scales(scales, e, h.groups, n, &si));

  const auto* wd = static_cast<const std::int8_t*>(w.data());
  const auto* sd = static_cast<const float*>(scales.data());
  for (std::int64_t x = 0; x < e; ++x) {
    for (std::int64_t g = 0; g < h.groups; ++g) {
      for (std::int64_t c = 0; c < n; ++c) {
        if (!std::isfinite(sd[si(x, g, c)])) {
          return Status::error(ErrorCode::kInvalidArgument, "scales[{}, {}, {}] = {} is not finite",
                               x, g, c, sd[si(x, g, c)]);
        }
      }
    }
  }
  if (options.type == WeightType::kInt4) {
    for (std::int64_t x = 0; x < e; ++x) {
      for (std::int64_t r = 0; r < k; ++r) {
        for (std::int64_t c = 0; c < n; ++c) {
          const int v = wd[at(w, x, r, c)];
          if (v < -8 || v > 7) {
            return Status::error(ErrorCode::kOutOfRange,
                                 "int4 weights[{}, {}, {}] = {} is outside [-8, 7]", x, r, c, v);
          }
        }
      }
    }
  }

  // Weights of 2 MiB and more go on transparent huge pages (where the kernel allows them): the
  // GEMMs stream them from memory once per row block, a 4 KiB page every 64 lines otherwise.
  constexpr std::uint64_t kHugePage = std::uint64_t(2) << 20;
  const bool huge = h.total_bytes >= kHugePage;
  const std::uint64_t align = huge ? kHugePage : 64;
  void* raw = std::aligned_alloc(align, (h.total_bytes + align - 1) & ~(align - 1));
  if (raw && huge) madvise(raw, (h.total_bytes + align - 1) & ~(align - 1), MADV_HUGEPAGE);
  if (!raw)
    return Status::error(ErrorCode::kOutOfMemory, "packing weights needs {} bytes", h.total_bytes);
  std::memset(raw, 0, h.total_bytes);
  std::memcpy(raw, &h, sizeof(h));
  auto* base = static_cast<std::uint8_t*>(raw);
  // The logical column of each packed column (packed_column's inverse), or -1 for padding.
  std::vector<std::int64_t> column(std::size_t(h.n_pad), -1);
  for (std::int64_t c = 0; c < n; ++c) column[std::size_t(h.packed_column(c))] = c;
  // Padding weights are 0, stored biased; padding scales are 0.
  for (std::int64_t x = 0; x < e; ++x) {
    std::uint8_t* data = base + h.data_offset + std::uint64_t(x) * h.expert_bytes;
    const std::int8_t* expert = wd + x * w.stride(0);
    const std::int64_t row_stride = w.stride(1), col_stride = w.stride(2);
    for (std::int64_t cb = 0; cb < h.n_pad / kPackCols; ++cb) {
      const std::int64_t* cols = column.data() + cb * kPackCols;
      for (std::int64_t k4 = 0; k4 < h.k_pad / 4; ++k4) {
        std::uint8_t* row =
            data + std::uint64_t(cb * (h.k_pad / 4) + k4) * std::uint64_t(h.row_bytes);
        for (int i = 0; i < 64; ++i) {
          const std::int64_t c = cols[i / 4], r = k4 * 4 + i % 4;
          const int v = (c >= 0 && r < k) ? expert[r * row_stride + c * col_stride] : 0;
          if (options.type == WeightType::kInt8) {
            row[i] = std::uint8_t(v + 128);
          } else {
            const std::uint8_t nibble = std::uint8_t(v + 8);
            row[i % 32] |= i < 32 ? nibble : std::uint8_t(nibble << 4);
          }
        }
      }
    }
    for (std::int64_t g = 0; g < h.groups; ++g) {
      float* s = reinterpret_cast<float*>(base + h.scales_offset) + (x * h.groups + g) * h.n_pad;
      for (std::int64_t c = 0; c < n; ++c) s[h.packed_column(c)] = sd[si(x, g, c)];
    }
  }
  out->buffer_.reset(static_cast<std::byte*>(raw));
  return Status::ok();
}

Status unpack_weights(const PackedWeightsHeader& h, const TensorView& w, const TensorView& scales) {
  HP_RETURN_IF_ERROR(validate_packed(&h));
  HP_RETURN_IF_ERROR(w.expect_dtype("weights", DType::kInt8));
  HP_RETURN_IF_ERROR(w.expect_shape("weights", {h.experts, h.k, h.n}));
  ScaleIndex si{};
  HP_RETURN_IF_ERROR(check_scales(scales, h.experts, h.groups, h.n, &si));
  auto* wd = static_cast<std::int8_t*>(w.data());
  auto* sd = static_cast<float*>(scales.data());
  for (std::int64_t x = 0; x < h.experts; ++x) {
    for (std::int64_t c = 0; c < h.n; ++c) {
      const std::int64_t p = h.packed_column(c);
      for (std::int64_t r = 0; r < h.k; ++r) wd[at(w, x, r, c)] = std::int8_t(h.value(x, r, p));
      for (std::int64_t g = 0; g < h.groups; ++g) sd[si(x, g, c)] = h.scales(x, g)[p];
    }
  }
  return Status::ok();
}

}  // namespace hp::kernels
