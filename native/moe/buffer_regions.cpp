#include "moe/buffer_regions.h"

#include <utility>

#include "moe/buffer.h"
#include "moe/window_layout.h"
#include "shmem/shmem.h"

namespace hp::moe {

using namespace window;  // NOLINT: the window's own constants

RegionShape region_shape(const BufferConfig& c, int ranks) {
  RegionShape s;
  s.ranks = std::size_t(ranks);
  s.tmax = std::size_t(c.max_tokens_per_rank);
  s.hidden = std::size_t(c.hidden);
  s.experts = std::size_t(c.num_experts);
  s.topk = std::size_t(c.topk);
  s.max_element_bytes = std::size_t(c.max_element_bytes);
  s.combine_element_bytes = std::size_t(c.combine_element_bytes);
  s.combine_row_bytes = round64(s.hidden * s.combine_element_bytes);
  return s;
}

std::size_t RegionShape::payload_bytes() const { return round64(hidden * max_element_bytes); }

namespace {

// Frees a region of its own, if it has one.
Status release_region(std::uint8_t** base) {
  if (*base == nullptr) return Status::ok();
  return hp::shmem::free(std::exchange(*base, nullptr));
}

}  // namespace

void StatusWords::plan(const RegionShape& shape, WindowPlan* plan) {
  ranks_ = shape.ranks;
  counts_at_ = kFlagKinds * ranks_ * kSlot;
  counts_slot_ = std::size_t(kCountsHeader) + ranks_ + shape.experts;
  offset_ = plan->take(counts_at_ + round64(2 * ranks_ * counts_slot_ * sizeof(std::int64_t)));
}

std::uint64_t* StatusWords::flag(int kind, int rank) const {
  return reinterpret_cast<std::uint64_t*>(base_ +
                                          (std::size_t(kind) * ranks_ + std::size_t(rank)) * kSlot);
}

std::int64_t* StatusWords::counts(std::uint64_t epoch, int rank) const {
  return reinterpret_cast<std::int64_t*>(base_ + counts_at_) +
         ((epoch % 2) * ranks_ + std::size_t(rank)) * counts_slot_;
}

void RowHalves::plan(std::size_t row_bytes, std::size_t rows_per_half, WindowPlan* plan) {
  row_bytes_ = row_bytes;
  half_ = rows_per_half * row_bytes;
  offset_ = plan->take(2 * half_);
}

void PushRecords::init(const RegionShape& shape) {
  topk_ = shape.topk;
  meta_bytes_ = round64(sizeof(Meta) + topk_ * (sizeof(std::int32_t) + sizeof(float)));
  record_bytes_ = meta_bytes_ + shape.payload_bytes();
}

Status PushRecords::allocate(std::int64_t capacity) {
  const Status s = reallocate_symmetric(
      &base_, std::max<std::size_t>(std::size_t(capacity) * record_bytes_, 64));
  if (!s.is_ok()) {
    return Status::error(
        s.code(),
        "{} records of {} bytes for dispatch ({}): raise HP_SHMEM_HEAP_SIZE or lower "
        "max_tokens_per_rank / capacity_factor",
        capacity, record_bytes_, s.message());
  }
  capacity_ = capacity;
  return Status::ok();
}

Status PushRecords::release() { return release_region(&base_); }

Status SendWindow::allocate(const RegionShape& shape) {
  const std::size_t pairs = shape.tmax * shape.topk;
  scale_ = round64(shape.tmax * shape.hidden * shape.max_element_bytes);
  expert_ = scale_ + round64(shape.tmax * sizeof(float));
  weight_ = expert_ + round64(pairs * sizeof(std::int32_t));
  list_ = weight_ + round64(pairs * sizeof(float));
  half_ = list_ + round64(shape.ranks * shape.tmax * sizeof(std::int32_t));
  const Status s = reallocate_symmetric(&base_, 2 * half_);
  if (!s.is_ok()) {
    return Status::error(
        s.code(),
        "the pull dispatch's send window of 2 x {} bytes ({}): raise HP_SHMEM_HEAP_SIZE "
        "or lower max_tokens_per_rank",
        half_, s.message());
  }
  return Status::ok();
}

Status SendWindow::release() { return release_region(&base_); }

SendWindow::Half SendWindow::half(std::uint64_t epoch, int rank) const {
  auto* half = static_cast<std::uint8_t*>(hp::shmem::ptr(base_ + (epoch % 2) * half_, rank));
  return {.payload = half,
          .scale = reinterpret_cast<float*>(half + scale_),
          .expert = reinterpret_cast<std::int32_t*>(half + expert_),
          .list = reinterpret_cast<std::int32_t*>(half + list_),
          .weight = reinterpret_cast<float*>(half + weight_)};
}

void LowLatencyRegions::plan(const RegionShape& shape, WindowPlan* plan) {
  shape_ = shape;
  const std::size_t local = shape.local_experts(), r = shape.ranks, tmax = shape.tmax;
  slot_bytes_ = kSlot + shape.payload_bytes();
  counts_at_ = plan->take(round64(2 * r * (std::size_t(kLowLatencyCountsHeader) + local) * 8));
  recv_at_ = plan->take(2 * local * r * tmax * slot_bytes_);
  back_at_ = plan->take(2 * shape.experts * tmax * shape.combine_row_bytes);
}

std::int64_t* LowLatencyRegions::counts(std::uint64_t epoch, int rank) const {
  const std::size_t slot = std::size_t(kLowLatencyCountsHeader) + shape_.local_experts();
  return reinterpret_cast<std::int64_t*>(window_ + counts_at_) +
         ((epoch % 2) * shape_.ranks + std::size_t(rank)) * slot;
}

std::uint8_t* LowLatencyRegions::slot(std::uint64_t epoch, std::int64_t local_expert, int src,
                                      std::int64_t i) const {
  const std::size_t r = shape_.ranks, tmax = shape_.tmax;
  const std::size_t half = shape_.local_experts() * r * tmax * slot_bytes_;
  return window_ + recv_at_ + (epoch % 2) * half +
         ((std::size_t(local_expert) * r + std::size_t(src)) * tmax + std::size_t(i)) * slot_bytes_;
}

std::uint8_t* LowLatencyRegions::back_row(std::uint64_t epoch, std::int64_t expert,
                                          std::int64_t slot) const {
  const std::size_t tmax = shape_.tmax, row = shape_.combine_row_bytes;
  const std::size_t half = shape_.experts * tmax * row;
  return window_ + back_at_ + (epoch % 2) * half +
         (std::size_t(expert) * tmax + std::size_t(slot)) * row;
}

Status CombineRows::allocate(const RegionShape& shape, std::int64_t capacity) {
  capacity_ = 0;
  const std::size_t row_bytes = shape.hidden * shape.combine_element_bytes;
  const std::size_t weights_at = round64(std::size_t(capacity) * row_bytes);
  const Status s =
      reallocate_symmetric(&base_, weights_at + round64(std::size_t(capacity) * sizeof(float)));
  if (!s.is_ok()) {
    return Status::error(
        s.code(),
        "{} combine rows of {} bytes (zero_copy_combine) ({}): raise HP_SHMEM_HEAP_SIZE "
        "or lower max_tokens_per_rank",
        capacity, row_bytes, s.message());
  }
  capacity_ = capacity;
  weights_at_ = weights_at;
  return Status::ok();
}

Status CombineRows::release() { return release_region(&base_); }

}  // namespace hp::moe
