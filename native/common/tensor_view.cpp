#include "common/tensor_view.h"

#include <algorithm>
#include <limits>

#include <fmt/ranges.h>

namespace hp {
namespace {

// Names by DType value (sizes: dtype_size in the header).
constexpr std::array<std::string_view, static_cast<std::size_t>(DType::kCount)> kDTypes = {
    "int8", "uint8", "int32", "int64", "bf16", "fp16", "fp32", "fp64",
};

bool valid(DType dtype) { return static_cast<std::size_t>(dtype) < kDTypes.size(); }

}  // namespace

std::string_view to_string(DType dtype) noexcept {
  return valid(dtype) ? kDTypes[std::size_t(dtype)] : std::string_view("invalid");
}

Status parse_dtype(std::string_view name, DType* dtype) {
  for (std::size_t i = 0; i < kDTypes.size(); ++i) {
    if (kDTypes[i] == name) {
      *dtype = static_cast<DType>(i);
      return Status::ok();
    }
  }
  return Status::error(
      ErrorCode::kInvalidArgument,
      "unknown dtype '{}': expected int8, uint8, int32, int64, bf16, fp16, fp32 or fp64", name);
}

TensorView::TensorView(void* data, DType dtype, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides)
    : data_(data) {
  if (shape.size() > kMaxDims || strides.size() != shape.size()) {
    header_ = header_of(dtype, 0, true);  // validate() reports it
    return;
  }
  header_ = header_of(dtype, int(shape.size()), false);
  std::copy(shape.begin(), shape.end(), shape_.begin());
  std::copy(strides.begin(), strides.end(), strides_.begin());
  classify();
}

TensorView TensorView::with_data(void* data) const noexcept {
  TensorView view = *this;
  view.data_ = data;
  view.header_ &= ~kDenseBit;
  view.classify();
  return view;
}

namespace {

// numel and the last element's offset (in elements), or false when either overflows int64.
bool checked_extent(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                    std::int64_t* numel, std::int64_t* last) {
  std::int64_t n = 1, off = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (__builtin_mul_overflow(n, shape[i], &n)) return false;
  }
  for (std::size_t i = 0; n > 0 && i < shape.size(); ++i) {
    std::int64_t term = 0;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &term) ||
        __builtin_add_overflow(off, term, &off)) {
      return false;
    }
  }
  *numel = n;
  *last = off;
  return true;
}

}  // namespace

std::int64_t TensorView::count_elements() const noexcept {
  std::int64_t n = 1;
  for (int i = 0; i < ndim(); ++i) n *= shape_[i];  // validate() rejects overflow
  return n;
}

bool TensorView::has_row_major_strides() const noexcept {
  if (numel() == 0) return true;  // an empty tensor has no layout to violate
  std::int64_t expected = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::size_t TensorView::measure_span_bytes() const noexcept {
  if (numel() == 0) return 0;
  std::int64_t last = 0;
  for (int i = 0; i < ndim(); ++i) last += (shape_[i] - 1) * strides_[i];
  return std::size_t(last + 1) * element_size();
}

bool TensorView::check_well_formed() const noexcept {
  if (!valid(dtype()) || bad_rank()) return false;
  std::int64_t n = 1, last = 0, term = 0;
  bool offset_overflows = false;  // matters only with elements (an empty view spans no bytes)
  for (int i = 0; i < ndim(); ++i) {
    if (shape_[i] < 0 || strides_[i] < 0 || __builtin_mul_overflow(n, shape_[i], &n)) return false;
    offset_overflows |= __builtin_mul_overflow(shape_[i] - 1, strides_[i], &term) ||
                        __builtin_add_overflow(last, term, &last);
  }
  if (n == 0) return true;  // no bytes: any data, any strides
  std::int64_t end = 0, bytes = 0;
  return !offset_overflows && !__builtin_add_overflow(last, 1, &end) &&
         !__builtin_mul_overflow(end, std::int64_t(element_size()), &bytes) && data_ != nullptr &&
         aligned();
}

// Check by check, independently of well_formed() (the test of the two compares them).
Status TensorView::validate(std::string_view what) const {
  HP_ENSURE(valid(dtype()), ErrorCode::kDTypeMismatch, "{}: invalid dtype {}", what, int(dtype()));
  HP_ENSURE(!bad_rank(), ErrorCode::kInvalidArgument,
            "{}: rank must be at most {} and strides must match the shape", what, kMaxDims);
  for (int i = 0; i < ndim(); ++i) {
    HP_ENSURE(shape_[i] >= 0, ErrorCode::kShapeMismatch, "{}: dim {} is negative ({})", what, i,
              shape_[i]);
    HP_ENSURE(strides_[i] >= 0, ErrorCode::kInvalidArgument, "{}: stride {} is negative ({})", what,
              i, strides_[i]);
  }
  std::int64_t n = 0, last = 0, end = 0, bytes = 0;
  HP_ENSURE(
      checked_extent(shape(), strides(), &n, &last) && !__builtin_add_overflow(last, 1, &end) &&
          !__builtin_mul_overflow(end, std::int64_t(element_size()), &bytes),
      ErrorCode::kInvalidArgument, "{}: shape [{}] with strides [{}] spans more than 2^63 bytes",
      what, fmt::join(shape(), ", "), fmt::join(strides(), ", "));
  HP_ENSURE(data_ != nullptr || n == 0, ErrorCode::kInvalidArgument,
            "{}: null data for a non-empty tensor", what);
  HP_ENSURE(n == 0 || aligned(), ErrorCode::kMisaligned,
            "{}: data {} is not aligned to its {}-byte elements", what, data_, element_size());
  return Status::ok();
}

Status TensorView::expect_shape(std::string_view what,
                                std::initializer_list<std::int64_t> expected) const {
  HP_RETURN_IF_ERROR(validate(what));
  bool match = ndim() == int(expected.size());
  for (int i = 0; match && i < ndim(); ++i) {
    const std::int64_t want = expected.begin()[i];
    match = want < 0 || want == shape_[i];
  }
  HP_ENSURE(match, ErrorCode::kShapeMismatch,
            "{}: shape [{}] does not match expected [{}] (-1: any)", what, fmt::join(shape(), ", "),
            fmt::join(expected, ", "));
  return Status::ok();
}

Status TensorView::expect_dtype(std::string_view what, DType expected) const {
  HP_ENSURE(dtype() == expected, ErrorCode::kDTypeMismatch, "{}: dtype {} where {} is required",
            what, hp::to_string(dtype()), hp::to_string(expected));
  return Status::ok();
}

std::string TensorView::to_string() const {
  if (bad_rank()) return "invalid tensor view";
  return fmt::format("{}[{}] strides [{}]", hp::to_string(dtype()), fmt::join(shape(), ", "),
                     fmt::join(strides(), ", "));
}

}  // namespace hp
