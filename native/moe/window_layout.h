// The pieces of a Buffer's window shared by its normal and low-latency modes (the regions:
// buffer_regions.h): status slots, flag kinds, row rounding and the input checks both modes
// make.
#ifndef HYPER_PARALLEL_MOE_WINDOW_LAYOUT_H_
#define HYPER_PARALLEL_MOE_WINDOW_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include <fmt/format.h>

#include "common/status.h"
#include "common/tensor_view.h"
#include "shmem/shmem.h"

namespace hp::moe::window {

inline constexpr std::size_t kSlot = 64;  // status words 64 bytes apart (the protocol rule)
// flags: kinds x R slots; rank s sets slot [kind][s] of a peer to the call's epoch.
enum FlagKind {
  kNotify = 0,
  kDispatch = 1,
  kCombine = 2,
  kLowLatencyDispatch = 3,
  kLowLatencyCombine = 4,
  kStreamedCombine = 5,
  kPulled = 6  // zero_copy_combine: rank s finished reading this rank's combine rows
};
inline constexpr int kFlagKinds = 7;
// A normal-mode counts slot starts with a status code, the rank's rows kind (below) and its
// expert_alignment; a low-latency one with the status code and the rows kind.
inline constexpr std::ptrdiff_t kCountsHeader = 3;
inline constexpr std::ptrdiff_t kLowLatencyCountsHeader = 2;

// What a rank's dispatched rows are (x's dtype, quantised or not), sent with its counts: ranks
// passing different ones would read each other's rows wrongly, so they all fail instead.
inline std::int64_t rows_kind(DType x_dtype, bool quantised) {
  return std::int64_t(x_dtype) << 1 | quantised;
}
// INVALID_ARGUMENT naming a rank whose rows kind (kind_of(rank)) differs from this one's.
template <typename KindOf>
Status expect_same_rows_kind(const char* call, int ranks, int me, KindOf kind_of) {
  const auto describe = [](std::int64_t kind) {
    return fmt::format("{}{}", to_string(DType(kind >> 1)), kind & 1 ? " quantised to int8" : "");
  };
  const std::int64_t mine = kind_of(me);
  for (int s = 0; s < ranks; ++s) {
    if (kind_of(s) != mine) {
      return Status::error(
          ErrorCode::kInvalidArgument,
          "{}: rank {} dispatches x {} and rank {} x {}: every rank must pass the same x dtype "
          "and quant",
          call, s, describe(kind_of(s)), me, describe(mine));
    }
  }
  return Status::ok();
}
// The largest expert_alignment: padded row counts stay far from overflowing int64.
inline constexpr std::int64_t kMaxExpertAlignment = 1 << 16;

inline std::size_t round64(std::size_t n) { return (n + 63) & ~std::size_t(63); }

// Frees *region (when set), then allocates `bytes`, 64-byte aligned, of the symmetric heap
// there (null on failure). Collective: every rank with the same bytes (a region that grows).
inline Status reallocate_symmetric(std::uint8_t** region, std::size_t bytes) {
  if (*region != nullptr) {
    void* old = *region;
    *region = nullptr;
    HP_RETURN_IF_ERROR(hp::shmem::free(old));
  }
  void* fresh = nullptr;
  HP_RETURN_IF_ERROR(hp::shmem::align(64, bytes, &fresh));
  *region = static_cast<std::uint8_t*>(fresh);
  return Status::ok();
}

inline Status expect_contiguous(const TensorView& t, const char* what) {
  HP_ENSURE(t.is_contiguous(), ErrorCode::kInvalidArgument, "{} {}: expected contiguous", what,
            t.to_string());
  return Status::ok();
}

// A contiguous fp32 or bf16 tensor of `shape`; with max_element_bytes > 0, elements no wider
// than that (combine's rows: the buffer's combine_element_bytes).
inline Status expect_float_rows(const TensorView& t, const char* what,
                                std::initializer_list<std::int64_t> shape,
                                std::int64_t max_element_bytes = 0) {
  HP_RETURN_IF_ERROR(t.expect_shape(what, shape));
  HP_ENSURE(t.dtype() == DType::kFP32 || t.dtype() == DType::kBF16, ErrorCode::kDTypeMismatch,
            "{} {}: expected fp32 or bf16", what, t.to_string());
  HP_RETURN_IF_ERROR(expect_contiguous(t, what));
  HP_ENSURE(max_element_bytes == 0 || std::int64_t(t.element_size()) <= max_element_bytes,
            ErrorCode::kInvalidArgument,
            "{} {} needs {} bytes per element; the buffer was made with combine_element_bytes = {}",
            what, t.to_string(), t.element_size(), max_element_bytes);
  return Status::ok();
}

}  // namespace hp::moe::window

#endif  // HYPER_PARALLEL_MOE_WINDOW_LAYOUT_H_
