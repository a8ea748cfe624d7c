// TensorView: a non-owning view of a strided tensor (dtype, shape, strides, data pointer).
//
// Layout: element (i0, ..., in-1) lives at data + sum(ik * strides[k]) * dtype_size(dtype);
// strides are in elements (as in PyTorch), may be 0 (broadcast) but never negative.
#ifndef HYPER_PARALLEL_COMMON_TENSOR_VIEW_H_
#define HYPER_PARALLEL_COMMON_TENSOR_VIEW_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/api.h"
#include "common/status.h"
#include "common/word_copy.h"

namespace hp {

// Numbers are stable (they cross the C ABI and the dump files).
enum class DType : std::uint8_t {
  kInt8 = 0,
  kUInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kBF16 = 4,
  kFP16 = 5,
  kFP32 = 6,
  kFP64 = 7,
  kCount
};

// Bytes per element; 0 if invalid. Inline: every submitted tensor asks, often twice.
inline std::size_t dtype_size(DType dtype) noexcept {
  constexpr std::uint8_t kSizes[] = {1, 1, 4, 8, 2, 2, 4, 8};
  static_assert(std::size(kSizes) == static_cast<std::size_t>(DType::kCount));
  return static_cast<std::size_t>(dtype) < std::size(kSizes)
             ? kSizes[static_cast<std::size_t>(dtype)]
             : 0;
}
HP_API std::string_view to_string(DType dtype) noexcept;  // "int8", "bf16", ...
HP_API Status parse_dtype(std::string_view name, DType* dtype);

class HP_API TensorView {
 public:
  static constexpr int kMaxDims = 8;

  TensorView() = default;
  // A contiguous (row-major) view. Inline (as classify()): the runtime's users build one per
  // tensor argument of every task they submit, mostly of a rank the compiler sees, and out of
  // line the loops over the dims were most of the view's cost.
  TensorView(void* data, DType dtype, std::span<const std::int64_t> shape);
  TensorView(void* data, DType dtype, std::initializer_list<std::int64_t> shape)
      : TensorView(data, dtype, std::span<const std::int64_t>(shape.begin(), shape.size())) {}
  // A strided view; call validate() before trusting it.
  TensorView(void* data, DType dtype, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> strides);

  void* data() const noexcept { return data_; }
  // The same view over other memory (dtype, shape, strides and any rank error kept).
  TensorView with_data(void* data) const noexcept;
  DType dtype() const noexcept { return static_cast<DType>(header_ & kDTypeBits); }
  int ndim() const noexcept { return static_cast<int>(header_ >> kNdimShift); }
  // For 0 <= i < ndim() (past it, a view holds no dims: what the storage holds there is
  // unspecified).
  std::int64_t dim(int i) const noexcept { return shape_[i]; }
  std::int64_t stride(int i) const noexcept { return strides_[i]; }
  std::span<const std::int64_t> shape() const noexcept {
    return {shape_.data(), std::size_t(ndim())};
  }
  std::span<const std::int64_t> strides() const noexcept {
    return {strides_.data(), std::size_t(ndim())};
  }

  // numel() and span_bytes() are exact for views that validate() accepts (which rejects
  // shapes and strides whose extent overflows).
  std::int64_t numel() const noexcept { return dense() ? numel_ : count_elements(); }
  std::size_t element_size() const noexcept { return dtype_size(dtype()); }
  bool is_contiguous() const noexcept { return dense() || has_row_major_strides(); }
  // Bytes from the first to one past the last addressable element (0 when empty).
  std::size_t span_bytes() const noexcept {
    return dense() ? static_cast<std::size_t>(numel_) * element_size() : measure_span_bytes();
  }
  // Known at construction to be well formed, non-empty and row-major contiguous (every view
  // whose data, dtype and layout pass validate() and that has elements and row-major strides):
  // such a view answers well_formed(), is_contiguous(), numel() and span_bytes() without
  // walking its dims (the task runtime asks them per submitted tensor).
  bool dense() const noexcept { return (header_ & kDenseBit) != 0; }

  // Checks dtype, rank, non-negative sizes and strides, an extent that fits in int64 bytes,
  // and data for a non-empty view, aligned to the element size (MISALIGNED otherwise). `what`
  // names the tensor in errors.
  Status validate(std::string_view what) const;
  // validate(...).is_ok(), in one pass and no Status (for a check per submitted tensor).
  bool well_formed() const noexcept { return dense() || check_well_formed(); }
  // validate() plus rank == ndim and, for each dim with expected >= 0, an exact size.
  Status expect_shape(std::string_view what, std::initializer_list<std::int64_t> expected) const;
  Status expect_dtype(std::string_view what, DType expected) const;

  std::string to_string() const;  // "bf16[4, 7168] strides [7168, 1]"

  // *out = *this, a word at a time (common/word_copy.h), reading only this view's dims: for a
  // view built just before, whose fields were stored one by one. The task runtime copies each
  // tensor argument of a submit twice (into the TaskArgs, then into the task's slot); as a
  // struct copy (16-byte loads across those stores) each load waited for the stores to reach
  // the cache, and the submitting thread is bound by its stores. copy_to() zeroes out's dims
  // past ndim(); copy_over(), for an `out` that holds a view already, leaves them as they are
  // (no view reads them).
  void copy_to(TensorView* out) const noexcept;
  void copy_over(TensorView* out) const noexcept;

 private:
  // Sets dense() and numel_ (constructors, once the other fields are set).
  void classify() noexcept;
  std::int64_t count_elements() const noexcept;
  bool has_row_major_strides() const noexcept;
  std::size_t measure_span_bytes() const noexcept;
  bool check_well_formed() const noexcept;
  // data is a multiple of the element size (a power of two; sizes 0 and 1 always are).
  bool aligned() const noexcept {
    return (reinterpret_cast<std::uintptr_t>(data_) &
            (std::max<std::size_t>(element_size(), 1) - 1)) == 0;
  }

  // The header word: dtype, a rank error (built with more than kMaxDims dims or mismatched
  // strides), dense() and ndim. One word, always stored whole, so that copy_to() loads it from
  // one store.
  static constexpr std::uint64_t kDTypeBits = 0xff;
  static constexpr std::uint64_t kBadRankBit = std::uint64_t{1} << 8;
  static constexpr std::uint64_t kDenseBit = std::uint64_t{1} << 16;
  static constexpr int kNdimShift = 32;
  static constexpr std::uint64_t header_of(DType dtype, int ndim, bool bad_rank) noexcept {
    return static_cast<std::uint64_t>(dtype) | (bad_rank ? kBadRankBit : 0) |
           (static_cast<std::uint64_t>(static_cast<std::uint32_t>(ndim)) << kNdimShift);
  }
  bool bad_rank() const noexcept { return (header_ & kBadRankBit) != 0; }

  void* data_ = nullptr;
  std::int64_t numel_ = 0;  // set when dense()
  std::uint64_t header_ = header_of(DType::kFP32, 0, false);
  std::array<std::int64_t, kMaxDims> shape_{};
  std::array<std::int64_t, kMaxDims> strides_{};
  static constexpr std::size_t kWordsBeforeDims = 3;  // data_, numel_, header_ (copy_to)
};

inline TensorView::TensorView(void* data, DType dtype, std::span<const std::int64_t> shape)
    : data_(data) {
  if (shape.size() > kMaxDims) {
    header_ = header_of(dtype, 0, true);  // validate() reports it
    return;
  }
  const int ndim = static_cast<int>(shape.size());
  header_ = header_of(dtype, ndim, false);
  std::int64_t stride = 1;
  // Bounded and unrolled: GCC turns a plain copy loop into a call to memmove, which costs more
  // than the view's whole construction otherwise.
#pragma GCC unroll 8
  for (int i = 0; i < kMaxDims; ++i) {
    if (i == ndim) break;
    shape_[i] = shape[i];
  }
  for (int i = ndim - 1; i >= 0; --i) {
    strides_[i] = stride;
    // Only a view with no elements, or one whose numel overflows (validate() refuses it), has a
    // stride past int64: it saturates (an empty view's strides address nothing).
    if (__builtin_mul_overflow(stride, shape[i] > 1 ? shape[i] : 1, &stride)) stride = INT64_MAX;
  }
  classify();
}

// Dense: valid dtype, data aligned to the element size, every dim at least 1, each stride of a dim
// longer than 1 the product of the dims inside it (size-1 dims may have any stride >= 0), and numel
// * element size in int64. Then validate() accepts the view: the dims' offset terms telescope to
// numel - 1.
inline void TensorView::classify() noexcept {
  if (bad_rank() || element_size() == 0 || data_ == nullptr || !aligned())
    return;  // size 0: invalid dtype
  std::int64_t n = 1, bytes = 0;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] < 1 || strides_[i] < 0 || (shape_[i] != 1 && strides_[i] != n) ||
        __builtin_mul_overflow(n, shape_[i], &n)) {
      return;
    }
  }
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(element_size()), &bytes)) return;
  numel_ = n;
  header_ |= kDenseBit;
}

inline void TensorView::copy_over(TensorView* out) const noexcept {
  static_assert(std::is_standard_layout_v<TensorView> && offsetof(TensorView, header_) == 16 &&
                    offsetof(TensorView, shape_) == kWordsBeforeDims * 8,
                "data_, numel_ and header_ are the view's first words");
  copy_words<kWordsBeforeDims * 8>(out, this);
  const int n = ndim();
#pragma GCC unroll 8
  for (int i = 0; i < kMaxDims; ++i) {
    if (i == n) break;
    copy_words<8>(&out->shape_[i], &shape_[i]);
    copy_words<8>(&out->strides_[i], &strides_[i]);
  }
}

inline void TensorView::copy_to(TensorView* out) const noexcept {
  if (out == this) return;
  out->shape_ = {};
  out->strides_ = {};
  copy_over(out);
}

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_TENSOR_VIEW_H_
