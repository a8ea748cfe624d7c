// The regions of a Buffer's symmetric memory, one type per mode, each with its layout.
//
// The window is one symmetric allocation; StatusWords (every mode), the normal combine's
// RowHalves, LowLatencyRegions (low_latency) and the streamed combine's RowHalves each take
// their part of it in that order when the buffer is made (plan) and find their addresses in it
// (attach). PushRecords, SendWindow and CombineRows are allocations of their own, because they
// grow or exist on one path only. Every rank plans the same layout from the same config, so
// that every offset is symmetric. A region only computes addresses; the protocols that write
// and read them are Buffer's (buffer.cpp and one file per mode).
#ifndef HYPER_PARALLEL_MOE_BUFFER_REGIONS_H_
#define HYPER_PARALLEL_MOE_BUFFER_REGIONS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"

namespace hp::moe {

struct BufferConfig;

// What every region's layout derives from: the buffer's config and the number of ranks R.
struct RegionShape {
  std::size_t ranks = 0, tmax = 0, hidden = 0, experts = 0, topk = 0;
  std::size_t max_element_bytes = 0, combine_element_bytes = 0;
  std::size_t combine_row_bytes = 0;  // H x combine_element_bytes, padded to 64 B
  std::size_t local_experts() const { return experts / ranks; }
  // A rank sends a token to at most min(K, R) ranks: that many return rows per token.
  std::size_t sends() const { return tmax * std::min(topk, ranks); }
  // One dispatched row of the widest unquantised dtype, padded to 64 B.
  std::size_t payload_bytes() const;
};
RegionShape region_shape(const BufferConfig& config, int ranks);

// The window's offsets, handed out in order as the regions are planned.
class WindowPlan {
 public:
  std::size_t take(std::size_t bytes) {
    const std::size_t at = bytes_;
    bytes_ += bytes;
    return at;
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
};

// The window's start (every mode):
//   flags   kFlagKinds x R status words, 64 bytes apart: notify[s], dispatch[s], combine[s],
//           low-latency dispatch[s] and combine[s], streamed combine[s], pulled[s] (set by
//           rank s to the call's epoch; pulled: s no longer reads this rank's combine rows);
//           the combine slots' second word is (epoch << 16 | error code) when rank s rejected
//           its inputs for that call (it still sets its flag: the others return ABORTED)
//   counts  2 x R x (3 + R + E) int64: slot s = rank s's status code (0 or the ErrorCode that
//           made it reject its inputs), its rows kind (x dtype and quantisation: ranks that
//           differ all fail), its expert_alignment, tokens per rank [R], pairs per expert
//           [E]; dispatch n uses half n % 2, so nobody overwrites a slot a slower rank is
//           still reading
class StatusWords {
 public:
  void plan(const RegionShape& shape, WindowPlan* plan);
  void attach(std::uint8_t* window) { base_ = window + offset_; }
  std::uint64_t* flag(int kind, int rank) const;
  std::int64_t* counts(std::uint64_t epoch, int rank) const;
  // The flags, which every rank zeroes in its own window before any peer writes them.
  std::uint8_t* flags() const { return base_; }
  std::size_t flag_bytes() const { return counts_at_; }

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t offset_ = 0, ranks_ = 0, counts_at_ = 0, counts_slot_ = 0;
};

// Combine rows in two halves of the window, call n using half n % 2 (so a rank may run the
// next combine while a slower one still sums this one), each row combine_row_bytes:
//   back       (Buffer::back_, the normal combine; none with zero_copy_combine, whose combine
//              copies no rows) T_max x min(K, R) rows per half: rank d's rows start after
//              those of d' < d, in the order of the tokens this rank sent to d
//   pair back  (the streamed combine) T_max x K rows per half: [token][k], the row of this
//              rank's pair (t, k), written by the rank of its expert
class RowHalves {
 public:
  void plan(std::size_t row_bytes, std::size_t rows_per_half, WindowPlan* plan);
  void attach(std::uint8_t* window) { base_ = window + offset_; }
  std::uint8_t* row(std::uint64_t epoch, std::int64_t index) const {
    return base_ + (epoch % 2) * half_ + std::size_t(index) * row_bytes_;
  }

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t offset_ = 0, half_ = 0, row_bytes_ = 0;
};

// The push dispatch's records (an allocation of its own, so that it can grow):
//   recv  the capacity in records: R x T_max when lossless (compact: source s's records start
//         after those of sources < s); a record = meta (int32 token, float scale,
//         int32 expert[K], float weight[K], padded to 64 B) + payload (H elements of the
//         widest dtype, padded to 64 B)
class PushRecords {
 public:
  struct Meta {  // a record's first bytes; expert[K] and weight[K] follow
    std::int32_t token;
    float scale;
  };
  void init(const RegionShape& shape);
  // Collective: every rank with the same capacity. Frees the previous records first.
  Status allocate(std::int64_t capacity);
  Status grow(std::int64_t capacity) {
    ++grown_;
    return allocate(capacity);
  }
  Status release();
  std::uint8_t* record(std::int64_t index) const {
    return base_ + std::size_t(index) * record_bytes_;
  }
  std::int32_t* experts(std::uint8_t* record) const {
    return reinterpret_cast<std::int32_t*>(record + sizeof(Meta));
  }
  float* weights(std::uint8_t* record) const {
    return reinterpret_cast<float*>(record + sizeof(Meta) + topk_ * sizeof(std::int32_t));
  }
  std::uint8_t* payload(std::uint8_t* record) const { return record + meta_bytes_; }
  std::size_t record_bytes() const { return record_bytes_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t times_grown() const { return grown_; }

 private:
  std::uint8_t* base_ = nullptr;
  std::int64_t capacity_ = 0, grown_ = 0;
  std::size_t topk_ = 0, meta_bytes_ = 0, record_bytes_ = 0;
};

// The pull dispatch's send window (an allocation of its own; the pull path only): two halves,
// dispatch n using half n % 2, each: payload [T_max, H x max_element_bytes] (this call's
// rows, contiguous), scale [T_max] fp32, expert [T_max, K] int32, weight [T_max, K] fp32, then
// list [R][T_max] int32: the tokens this rank sends to rank d, in order (each array 64-byte
// aligned).
class SendWindow {
 public:
  struct Half {  // one half of a rank's send window, as this process sees it
    std::uint8_t* payload;
    float* scale;
    std::int32_t *expert, *list;
    float* weight;
  };
  // Collective (create calls it on every rank).
  Status allocate(const RegionShape& shape);
  Status release();
  Half half(std::uint64_t epoch, int rank) const;  // rank's half of `epoch` (mapped here)

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t scale_ = 0, expert_ = 0, weight_ = 0, list_ = 0, half_ = 0;
};

// The low-latency mode's regions (low_latency; each in two halves, call n using half n % 2: a
// rank can be at most one call ahead of another, since a call returns only when every rank has
// entered it):
//   ll counts  2 x R x (2 + E_local) int64: slot s = rank s's status code, its rows kind, its
//              pairs per expert
//   ll recv    2 x E_local x R x T_max slots: meta (int32 token, float scale, float weight;
//              64 B) + payload (H x max_element_bytes, padded to 64 B); source s fills
//              [e][s][0, n)
//   ll back    2 x E x T_max rows of combine_row_bytes: [expert][slot], the slot of this
//              rank's pair at that expert (so each expert rank writes one contiguous run)
class LowLatencyRegions {
 public:
  void plan(const RegionShape& shape, WindowPlan* plan);
  void attach(std::uint8_t* window) { window_ = window; }
  std::int64_t* counts(std::uint64_t epoch, int rank) const;
  std::uint8_t* slot(std::uint64_t epoch, std::int64_t local_expert, int src, std::int64_t i) const;
  std::uint8_t* back_row(std::uint64_t epoch, std::int64_t expert, std::int64_t slot) const;
  std::size_t slot_bytes() const { return slot_bytes_; }

  std::uint64_t dispatch_epoch = 0, combine_epoch = 0;  // the last calls of this rank

 private:
  std::uint8_t* window_ = nullptr;
  RegionShape shape_;
  std::size_t slot_bytes_ = 0, counts_at_ = 0, recv_at_ = 0, back_at_ = 0;
};

// The zero-copy combine's rows (zero_copy_combine; an allocation of its own, grown
// collectively by dispatch when a rank receives more rows; it starts at T_max x K rows, the
// average load):
//   combine rows  [capacity, H] of combine_element_bytes (fp32 or bf16): the expert outputs
//                 of the last dispatch's rows, written by the caller (combine_buffer), then
//                 [capacity] fp32 weights, written by combine
class CombineRows {
 public:
  // Collective: every rank with the same capacity. Frees the previous rows first.
  Status allocate(const RegionShape& shape, std::int64_t capacity);
  Status release();
  std::uint8_t* rows() const { return base_; }
  float* weights() const { return reinterpret_cast<float*>(base_ + weights_at_); }
  std::size_t weights_offset() const { return weights_at_; }
  std::int64_t capacity() const { return capacity_; }

  std::uint64_t pulled_epoch = 0;     // the last combine that read these rows
  std::uint64_t planned_epoch = 0;    // the last dispatch whose pulls plan_pulls planned
  std::vector<std::uint8_t> staging;  // rows and weights of peers read with get_nbi

 private:
  std::uint8_t* base_ = nullptr;
  std::int64_t capacity_ = 0;
  std::size_t weights_at_ = 0;
};

}  // namespace hp::moe

#endif  // HYPER_PARALLEL_MOE_BUFFER_REGIONS_H_
