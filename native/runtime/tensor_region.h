// TensorRegion: the bytes a TensorView touches, for dependency inference.
//
// Buffers are identified by address: two views overlap when they share a byte of memory,
// whatever "base" they were sliced from. A region is built from a view as
//   - the bounding range [lo, hi) of its bytes;
//   - its layout in bytes, normalised: size-1 and stride-0 dims dropped (they add no bytes),
//     dims sorted by descending stride, and each dim that continues a contiguous run merged
//     into it, leaving `outer` dims over contiguous runs of `run_bytes` bytes.
// The layout is "nested" when every dim's stride is at least the reach of the dims inside it
// ((n-1)*stride summed over inner dims, plus run_bytes): then runs never interleave, no byte
// is touched twice, and iterating the outer dims odometer-style yields runs in increasing
// address order. Slices, tiles, transposes and padded rows of a dense tensor are nested.
//
// overlaps(a, b) is
//   - exact "no" when the bounding ranges are disjoint, "yes" when they meet and both regions
//     are contiguous (inline: the tensor map's common case);
//   - exact when both regions are nested and each has at most kMaxExactRuns runs: a merge walk
//     over the two sorted run lists (O(runs a + runs b));
//   - conservative otherwise (self-overlapping or interleaved layouts, or more runs): "yes"
//     whenever the bounding ranges intersect. A conservative "yes" only adds an ordering edge.
// covers(outer, inner) is exact when `outer` is one contiguous run, and "no" otherwise.
#ifndef HYPER_PARALLEL_RUNTIME_TENSOR_REGION_H_
#define HYPER_PARALLEL_RUNTIME_TENSOR_REGION_H_

#include <array>
#include <cstdint>
#include <string>

#include "common/api.h"
#include "common/tensor_view.h"

namespace hp::runtime {

class HP_API TensorRegion {
 public:
  static constexpr std::int64_t kMaxExactRuns = 1 << 14;

  TensorRegion() noexcept {}
  // Copies only the outer dims in use: regions are copied on every submit (into the access list
  // and the tensor map), and most are one run.
  TensorRegion(const TensorRegion& other) noexcept { copy_from(other); }
  TensorRegion& operator=(const TensorRegion& other) noexcept {
    copy_from(other);
    return *this;
  }
  static TensorRegion of(const TensorView& view) {
    TensorRegion r;
    r.assign(view);
    return r;
  }
  // The contiguous bytes [lo, hi).
  static TensorRegion range(std::uintptr_t lo, std::uintptr_t hi) noexcept {
    TensorRegion r;
    r.lo_ = lo;
    r.hi_ = hi;
    r.run_bytes_ = static_cast<std::int64_t>(hi - lo);
    r.runs_ = hi > lo ? 1 : 0;
    return r;
  }
  // This region becomes the view's (in place: no region is copied). A dense view's (one run: the
  // common case, from every submitted tensor argument) inline, without a call.
  void assign(const TensorView& view) {
    if (!view.dense()) return assign_layout(view);
    lo_ = reinterpret_cast<std::uintptr_t>(view.data());
    run_bytes_ = view.numel() * static_cast<std::int64_t>(view.element_size());
    hi_ = lo_ + static_cast<std::uintptr_t>(run_bytes_);
    outer_dims_ = 0;
    nested_ = true;
    runs_ = 1;  // a dense view has elements
  }

  bool empty() const noexcept { return lo_ == hi_; }
  std::uintptr_t lo() const noexcept { return lo_; }
  std::uintptr_t hi() const noexcept { return hi_; }
  bool contiguous() const noexcept { return outer_dims_ == 0; }
  bool nested() const noexcept { return nested_; }
  // Contiguous runs of the layout (saturates at kMaxExactRuns + 1).
  std::int64_t runs() const noexcept { return runs_; }
  bool exact() const noexcept { return nested_ && runs_ <= kMaxExactRuns; }

  std::string to_string() const;

 private:
  friend bool overlaps_runs(const TensorRegion& a, const TensorRegion& b);
  friend class RunCursor;

  void assign_layout(const TensorView& view);  // assign() of a view that is not dense()

  void copy_from(const TensorRegion& other) noexcept {
    lo_ = other.lo_;
    hi_ = other.hi_;
    run_bytes_ = other.run_bytes_;
    outer_dims_ = other.outer_dims_;
    nested_ = other.nested_;
    runs_ = other.runs_;
    for (int i = 0; i < outer_dims_; ++i) {
      extents_[static_cast<std::size_t>(i)] = other.extents_[static_cast<std::size_t>(i)];
      strides_[static_cast<std::size_t>(i)] = other.strides_[static_cast<std::size_t>(i)];
    }
  }

  std::uintptr_t lo_ = 0;
  std::uintptr_t hi_ = 0;
  std::int64_t run_bytes_ = 0;
  int outer_dims_ = 0;  // outermost first
  bool nested_ = true;
  std::int64_t runs_ = 0;
  // Only the first outer_dims_ entries are set (and copied).
  std::array<std::int64_t, TensorView::kMaxDims> extents_;
  std::array<std::int64_t, TensorView::kMaxDims> strides_;  // bytes
};

// overlaps() of two non-empty regions whose bounding ranges meet, not both contiguous.
HP_API bool overlaps_runs(const TensorRegion& a, const TensorRegion& b);
inline bool overlaps(const TensorRegion& a, const TensorRegion& b) {
  if (a.empty() || b.empty() || a.hi() <= b.lo() || b.hi() <= a.lo()) return false;
  return (a.contiguous() && b.contiguous()) || overlaps_runs(a, b);
}
inline bool covers(const TensorRegion& outer, const TensorRegion& inner) {
  return outer.contiguous() && !outer.empty() && outer.lo() <= inner.lo() &&
         inner.hi() <= outer.hi();
}

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TENSOR_REGION_H_
