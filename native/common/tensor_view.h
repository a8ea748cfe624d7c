// TensorView: a non-owning view of a strided tensor (dtype, shape, strides, data pointer).
//
// Layout: element (i0, ..., in-1) lives at data + sum(ik * strides[k]) * dtype_size(dtype);
// strides are in elements (as in PyTorch), may be 0 (broadcast) but never negative.
#ifndef HYPER_PARALLEL_COMMON_TENSOR_VIEW_H_
#define HYPER_PARALLEL_COMMON_TENSOR_VIEW_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <string_view>

#include "api.h"
#include "status.h"

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
  return static_cast<std::size_t>(dtype) < std::size(kSizes) ? kSizes[static_cast<std::size_t>(dtype)] : 0;
}
HP_API std::string_view to_string(DType dtype) noexcept;  // "int8", "bf16", ...
HP_API Status parse_dtype(std::string_view name, DType* dtype);

class HP_API TensorView {
 public:
  static constexpr int kMaxDims = 8;

  TensorView() = default;
  // A contiguous (row-major) view.
  TensorView(void* data, DType dtype, std::span<const std::int64_t> shape);
  TensorView(void* data, DType dtype, std::initializer_list<std::int64_t> shape)
      : TensorView(data, dtype, std::span<const std::int64_t>(shape.begin(), shape.size())) {}
  // A strided view; call validate() before trusting it.
  TensorView(void* data, DType dtype, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> strides);

  void* data() const noexcept { return data_; }
  // The same view over other memory (dtype, shape, strides and any rank error kept).
  TensorView with_data(void* data) const noexcept;
  DType dtype() const noexcept { return dtype_; }
  int ndim() const noexcept { return ndim_; }
  std::int64_t dim(int i) const noexcept { return shape_[i]; }
  std::int64_t stride(int i) const noexcept { return strides_[i]; }
  std::span<const std::int64_t> shape() const noexcept { return {shape_.data(), std::size_t(ndim_)}; }
  std::span<const std::int64_t> strides() const noexcept {
    return {strides_.data(), std::size_t(ndim_)};
  }

  // numel() and span_bytes() are exact for views that validate() accepts (which rejects
  // shapes and strides whose extent overflows).
  std::int64_t numel() const noexcept { return dense_ ? numel_ : count_elements(); }
  std::size_t element_size() const noexcept { return dtype_size(dtype_); }
  bool is_contiguous() const noexcept { return dense_ || has_row_major_strides(); }
  // Bytes from the first to one past the last addressable element (0 when empty).
  std::size_t span_bytes() const noexcept {
    return dense_ ? static_cast<std::size_t>(numel_) * element_size() : measure_span_bytes();
  }
  // Known at construction to be well formed, non-empty and row-major contiguous (every view
  // whose data, dtype and layout pass validate() and that has elements and row-major strides):
  // such a view answers well_formed(), is_contiguous(), numel() and span_bytes() without
  // walking its dims (the task runtime asks them per submitted tensor).
  bool dense() const noexcept { return dense_; }

  // Checks dtype, rank, non-negative sizes and strides, an extent that fits in int64 bytes,
  // and data for a non-empty view. `what` names the tensor in errors.
  Status validate(std::string_view what) const;
  // validate(...).is_ok(), in one pass and no Status (for a check per submitted tensor).
  bool well_formed() const noexcept { return dense_ || check_well_formed(); }
  // validate() plus rank == ndim and, for each dim with expected >= 0, an exact size.
  Status expect_shape(std::string_view what, std::initializer_list<std::int64_t> expected) const;
  Status expect_dtype(std::string_view what, DType expected) const;

  std::string to_string() const;  // "bf16[4, 7168] strides [7168, 1]"

 private:
  // Sets dense_ and numel_ (constructors, once the fields are set).
  void classify() noexcept;
  std::int64_t count_elements() const noexcept;
  bool has_row_major_strides() const noexcept;
  std::size_t measure_span_bytes() const noexcept;
  bool check_well_formed() const noexcept;

  void* data_ = nullptr;
  std::int64_t numel_ = 0;  // set when dense_
  DType dtype_ = DType::kFP32;
  bool bad_rank_ = false;  // built with more than kMaxDims dims or mismatched strides
  bool dense_ = false;     // see dense()
  int ndim_ = 0;
  std::array<std::int64_t, kMaxDims> shape_{};
  std::array<std::int64_t, kMaxDims> strides_{};
};

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_TENSOR_VIEW_H_
