#include "runtime/tensor_region.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace hp::runtime {

void TensorRegion::assign_layout(const TensorView& view) {
  TensorRegion& r = *this;
  r.run_bytes_ = 0;
  r.outer_dims_ = 0;
  r.nested_ = true;
  r.runs_ = 0;
  const std::int64_t element = static_cast<std::int64_t>(view.element_size());
  const auto base = reinterpret_cast<std::uintptr_t>(view.data());
  r.lo_ = r.hi_ = base;
  // numel() is exact for a view validate() accepts (its product, outermost dim first, fits).
  if (view.numel() == 0) return;  // no elements: no bytes
  if (view.is_contiguous()) {     // one run
    r.run_bytes_ = view.numel() * element;
    r.hi_ = base + static_cast<std::uintptr_t>(r.run_bytes_);
    r.runs_ = 1;
    return;
  }
  struct Dim {
    std::int64_t extent, stride;
  };
  std::array<Dim, TensorView::kMaxDims> dims{};
  int n = 0;
  for (int i = 0; i < view.ndim(); ++i) {
    if (view.dim(i) == 1 || view.stride(i) == 0) continue;
    dims[static_cast<std::size_t>(n++)] = {view.dim(i), view.stride(i) * element};
  }
  r.hi_ = base + view.span_bytes();
  // Innermost (smallest stride) first while normalising.
  for (int i = 1; i < n; ++i) {  // insertion sort: at most 8 dims (and std::sort over a
    // prefix of the array trips GCC 12's -Warray-bounds)
    for (int j = i; j > 0 && dims[static_cast<std::size_t>(j)].stride <
                                 dims[static_cast<std::size_t>(j - 1)].stride;
         --j) {
      std::swap(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
    }
  }
  r.run_bytes_ = element;
  int first_outer = 0;
  while (first_outer < n && dims[static_cast<std::size_t>(first_outer)].stride == r.run_bytes_) {
    r.run_bytes_ *= dims[static_cast<std::size_t>(first_outer)].extent;
    ++first_outer;
  }
  // Merge outer dims that continue each other: (n1, s1) then (n2, n1 * s1) is (n1 * n2, s1).
  std::array<Dim, TensorView::kMaxDims> outer{};
  int m = 0;
  for (int i = first_outer; i < n; ++i) {
    const Dim d = dims[static_cast<std::size_t>(i)];
    if (m > 0 && d.stride == outer[static_cast<std::size_t>(m - 1)].extent *
                                 outer[static_cast<std::size_t>(m - 1)].stride) {
      outer[static_cast<std::size_t>(m - 1)].extent *= d.extent;
    } else {
      outer[static_cast<std::size_t>(m++)] = d;
    }
  }
  std::int64_t reach = r.run_bytes_;
  r.runs_ = 1;
  for (int i = 0; i < m; ++i) {
    const Dim d = outer[static_cast<std::size_t>(i)];
    if (d.stride < reach) r.nested_ = false;
    reach += (d.extent - 1) * d.stride;
    r.runs_ =
        std::min<std::int64_t>(r.runs_ * std::min(d.extent, kMaxExactRuns + 1), kMaxExactRuns + 1);
  }
  r.outer_dims_ = m;
  for (int i = 0; i < m; ++i) {  // stored outermost first
    r.extents_[static_cast<std::size_t>(i)] = outer[static_cast<std::size_t>(m - 1 - i)].extent;
    r.strides_[static_cast<std::size_t>(i)] = outer[static_cast<std::size_t>(m - 1 - i)].stride;
  }
  return;
}

std::string TensorRegion::to_string() const {
  return fmt::format("bytes [{:#x}, {:#x}) in {} run(s) of {} bytes{}", lo_, hi_, runs_, run_bytes_,
                     nested_ ? "" : " (interleaved)");
}

// Walks the contiguous runs of a nested region in increasing address order.
class RunCursor {
 public:
  explicit RunCursor(const TensorRegion& r) : r_(r), start_(r.lo_) {}
  bool done() const noexcept { return done_; }
  std::uintptr_t start() const noexcept { return start_; }
  std::uintptr_t end() const noexcept {
    return start_ + static_cast<std::uintptr_t>(r_.run_bytes_);
  }
  void next() noexcept {
    for (int d = r_.outer_dims_ - 1; d >= 0; --d) {
      const auto i = static_cast<std::size_t>(d);
      if (++index_[i] < r_.extents_[i]) {
        start_ += static_cast<std::uintptr_t>(r_.strides_[i]);
        return;
      }
      start_ -= static_cast<std::uintptr_t>((r_.extents_[i] - 1) * r_.strides_[i]);
      index_[i] = 0;
    }
    done_ = true;
  }

 private:
  const TensorRegion& r_;
  std::uintptr_t start_;
  std::array<std::int64_t, TensorView::kMaxDims> index_{};
  bool done_ = false;
};

bool overlaps_runs(const TensorRegion& a, const TensorRegion& b) {
  if (!a.exact() || !b.exact()) return true;  // conservative
  RunCursor x(a), y(b);
  while (!x.done() && !y.done()) {
    if (x.end() <= y.start()) {
      x.next();
    } else if (y.end() <= x.start()) {
      y.next();
    } else {
      return true;
    }
  }
  return false;
}

}  // namespace hp::runtime
