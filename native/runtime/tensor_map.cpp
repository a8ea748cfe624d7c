#include "runtime/tensor_map.h"

#include <algorithm>
#include <bit>

namespace hp::runtime {

namespace {

constexpr std::uint64_t kListWalkPerProbe = 4;

std::size_t hash_of(std::uint64_t key) noexcept {
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 17);
}

}  // namespace

TensorMap::TensorMap() { clear(); }

TensorMap::~TensorMap() noexcept = default;

void TensorMap::clear() noexcept {
  entries_.clear();
  near_.clear();
  strided_.clear();
  free_.clear();
  table_.clear();
  table_used_ = 0;
  live_ = 0;
  for (int w = 0; w < 2; ++w) {
    classes_in_use_[w] = 0;
    for (int k = 0; k < 64; ++k) {
      class_head_[w][k] = kNone;
      class_count_[w][k] = 0;
      class_straddling_[w][k] = 0;
    }
  }
}

int TensorMap::class_of(std::uintptr_t lo, std::uintptr_t hi) noexcept {
  const auto length = static_cast<std::uint64_t>(hi - lo);
  return std::max(kMinClass, static_cast<int>(std::bit_width(length - 1)));
}

std::size_t TensorMap::Slot::home(std::size_t mask) const noexcept { return hash_of(key) & mask; }

TensorMap::Slot* TensorMap::bucket(std::uint64_t key) noexcept {
  if (table_.empty()) return nullptr;
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = hash_of(key) & mask;; i = (i + 1) & mask) {
    if (table_[i].key == key) return &table_[i];
    if (table_[i].key == kEmptyKey) return nullptr;
  }
}

void TensorMap::place(std::size_t i, const Slot& slot) noexcept {
  table_[i] = slot;
  for (std::uint32_t head : slot.head) {
    if (head != kNone) entries_[head].bucket = static_cast<std::uint32_t>(i);
  }
}

void TensorMap::grow() {
  // The new table is allocated before the old one is given up (a failed allocation changes
  // nothing).
  std::vector<Slot> old(std::max<std::size_t>(64, table_.size() * 2),
                        Slot{kEmptyKey, {kNone, kNone}});
  table_.swap(old);
  const std::size_t mask = table_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.key == kEmptyKey) continue;
    std::size_t i = slot.home(mask);
    while (table_[i].key != kEmptyKey) i = (i + 1) & mask;
    place(i, slot);
  }
}

std::uint32_t TensorMap::table_put(const Slot& slot) {
  if ((table_used_ + 1) * 4 > table_.size()) grow();
  const std::size_t mask = table_.size() - 1;
  std::size_t i = slot.home(mask);
  while (table_[i].key != kEmptyKey) i = (i + 1) & mask;
  place(i, slot);
  ++table_used_;
  return static_cast<std::uint32_t>(i);
}

// Linear probing without tombstones: the buckets after the hole that may move into it (their
// probe path runs through it) move back, hole by hole, until an empty slot.
void TensorMap::erase_bucket(std::size_t hole) noexcept {
  const std::size_t mask = table_.size() - 1;
  for (std::size_t j = (hole + 1) & mask; table_[j].key != kEmptyKey; j = (j + 1) & mask) {
    const std::size_t home = table_[j].home(mask);
    // table_[j] may move to `hole` unless its home lies cyclically in (hole, j].
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      place(hole, table_[j]);
      hole = j;
    }
  }
  table_[hole] = Slot{kEmptyKey, {kNone, kNone}};
  --table_used_;
}

std::uint32_t TensorMap::bucket_to_insert(std::uint64_t key) {
  if (!table_.empty()) {
    const std::size_t mask = table_.size() - 1;
    for (std::size_t i = hash_of(key) & mask;; i = (i + 1) & mask) {
      if (table_[i].key == key) return static_cast<std::uint32_t>(i);
      if (table_[i].key == kEmptyKey) break;
    }
  }
  return table_put(Slot{key, {kNone, kNone}});
}

[[gnu::always_inline]] inline void TensorMap::insert(std::uint32_t index) {
  Entry& e = entries_[index];
  Near& n = near_[index];
  const int w = e.write ? 1 : 0;
  e.key = key_of(e.size_class, n.lo >> e.size_class);
  e.prev = kNone;
  e.bucket = bucket_to_insert(e.key);
  Slot& b = table_[e.bucket];
  n.next = b.head[w];
  if (n.next != kNone) entries_[n.next].prev = index;
  b.head[w] = index;
  e.class_prev = kNone;
  n.class_next = class_head_[w][e.size_class];
  if (n.class_next != kNone) entries_[n.class_next].class_prev = index;
  class_head_[w][e.size_class] = index;
  ++class_count_[w][e.size_class];
  class_straddling_[w][e.size_class] += straddles(n, e.size_class) ? 1 : 0;
  classes_in_use_[w] |= std::uint64_t{1} << e.size_class;
  e.live = true;
  ++live_;
}

void TensorMap::unlink(std::uint32_t index) {
  Entry& e = entries_[index];
  const Near& n = near_[index];
  const int w = e.write ? 1 : 0;
  if (e.prev != kNone) {
    near_[e.prev].next = n.next;
    if (n.next != kNone) entries_[n.next].prev = e.prev;
  } else {
    Slot& b = table_[e.bucket];
    b.head[w] = n.next;
    if (n.next != kNone) {
      entries_[n.next].prev = kNone;
      entries_[n.next].bucket = e.bucket;
    } else if (b.empty()) {
      erase_bucket(e.bucket);
    }
  }
  if (e.class_prev != kNone) {
    near_[e.class_prev].class_next = n.class_next;
  } else {
    class_head_[w][e.size_class] = n.class_next;
  }
  if (n.class_next != kNone) entries_[n.class_next].class_prev = e.class_prev;
  if (--class_count_[w][e.size_class] == 0)
    classes_in_use_[w] &= ~(std::uint64_t{1} << e.size_class);
  class_straddling_[w][e.size_class] -= straddles(n, e.size_class) ? 1 : 0;
  e.live = false;
  e.owner = nullptr;
  free_.push_back(index);
  --live_;
}

[[gnu::always_inline]] inline void TensorMap::gather_near(std::uintptr_t lo, std::uintptr_t hi,
                                                          bool writes_only) {
  near_found_.clear();
  const Near* near = near_.data();
  const int w0 = writes_only ? 1 : 0;
  const std::uint64_t classes = classes_in_use_[1] | (writes_only ? 0 : classes_in_use_[0]);
  for (std::uint64_t c = classes; c != 0; c &= c - 1) {
    const int k = std::countr_zero(c);
    // The bucket before lo's holds entries that may reach into lo's only if some straddle.
    std::uintptr_t first = lo >> k;
    const bool straddling =
        class_straddling_[1][k] != 0 || (!writes_only && class_straddling_[0][k] != 0);
    if (straddling && first > 0) --first;
    const std::uintptr_t last = (hi - 1) >> k;
    // Per list (reads, writes): walk the buckets, or the class's list when it is shorter than
    // kListWalkPerProbe entries per bucket (a probe hashes into the table; a list entry is a
    // 24-byte read and a compare). A list of a class not in use is empty (count 0).
    bool in_buckets[2] = {false, false};
    for (int w = w0; w < 2; ++w) {
      const std::uint32_t count = class_count_[w][k];
      if ((last - first + 1) * kListWalkPerProbe <= count) {
        in_buckets[w] = true;
        continue;
      }
      for (std::uint32_t i = class_head_[w][k]; i != kNone; i = near[i].class_next) {
        if (near[i].lo < hi && lo < near[i].hi) near_found_.push_back(i);
      }
    }
    if (!in_buckets[0] && !in_buckets[1]) continue;
    for (std::uintptr_t g = first; g <= last; ++g) {
      const Slot* b = bucket(key_of(k, g));
      if (b == nullptr) continue;
      for (int w = w0; w < 2; ++w) {
        if (!in_buckets[w]) continue;
        for (std::uint32_t i = b->head[w]; i != kNone; i = near[i].next) {
          if (near[i].lo < hi && lo < near[i].hi) near_found_.push_back(i);
        }
      }
    }
  }
}

namespace {
// The kind of a dependency of an access with the tag on an entry that only reads ([0]) or
// writes ([1]); OUTPUT accesses find nothing, NO_DEP ones only creators (whose memory they hold).
static_assert(static_cast<int>(ArgTag::kNoDep) == 4, "kKindOf has a row per ArgTag, in order");
constexpr DepKind kKindOf[5][2] = {
    /* kInput */ {DepKind::kRaw, DepKind::kRaw},
    /* kOutput */ {DepKind::kRaw, DepKind::kRaw},
    /* kInOut */ {DepKind::kWar, DepKind::kRaw},
    /* kOutputExisting */ {DepKind::kWar, DepKind::kWaw},
    /* kNoDep */ {DepKind::kRaw, DepKind::kRaw},
};
}  // namespace

[[gnu::always_inline]] inline void TensorMap::find_dependencies(
    std::span<const TensorAccess> accesses, std::vector<FoundDependency>* found,
    std::vector<std::pair<int, std::uint32_t>>* covered) {
  for (int ai = 0; ai < static_cast<int>(accesses.size()); ++ai) {
    const TensorAccess& a = accesses[static_cast<std::size_t>(ai)];
    if (a.tag == ArgTag::kOutput || a.region.empty()) continue;
    const bool no_dep = a.tag == ArgTag::kNoDep;
    // INPUT and NO_DEP accesses depend only on writes (creators are writes).
    const bool writes_only = a.tag == ArgTag::kInput || no_dep;
    const bool contiguous = a.region.contiguous();
    const bool may_cover = covered != nullptr && !writes_only && contiguous;
    const std::uintptr_t lo = a.region.lo(), hi = a.region.hi();
    const DepKind* kind = kKindOf[static_cast<int>(a.tag)];
    gather_near(lo, hi, writes_only);
    for (std::uint32_t index : near_found_) {
      const Entry& e = entries_[index];
      if (no_dep && !e.creator) continue;
      // Bounding ranges that meet (gather_near) are an overlap when both regions are one run.
      if (!(contiguous && e.contiguous) && !overlaps_entry(a.region, index)) continue;
      if (may_cover && !e.creator && lo <= near_[index].lo && near_[index].hi <= hi) {
        covered->push_back({ai, index});
      }
      // Built in place, each member once (emplace_back() then assignments stored each twice).
      found->emplace_back(
          Dependency{.pred = e.task,
                     .arg_index = a.arg_index,
                     .source = e.creator ? DepSource::kCreator : DepSource::kTensorMap,
                     .kind = kind[e.write ? 1 : 0]},
          e.owner, !no_dep, e.creator);
    }
  }
}

[[gnu::always_inline]] inline void TensorMap::record_accesses(
    TaskId task, TaskSlot* owner, std::span<const TensorAccess> accesses,
    const std::vector<std::pair<int, std::uint32_t>>* covered,
    std::vector<std::uint32_t>* handles) {
  std::size_t next_covered = 0;  // covered lists entries by access, in access order
  for (int ai = 0; ai < static_cast<int>(accesses.size()); ++ai) {
    const TensorAccess& a = accesses[static_cast<std::size_t>(ai)];
    if (a.tag == ArgTag::kNoDep || a.region.empty()) continue;
    const bool write = a.tag != ArgTag::kInput;
    const std::uintptr_t lo = a.region.lo(), hi = a.region.hi();
    // A covered write entry of exactly this range is taken over in place (its bucket, list,
    // class and range stay right): a buffer rewritten task after task costs no unlink and insert.
    std::uint32_t index = kNone;
    auto drop = [&](std::uint32_t dropped) {
      // An entry this task dropped for an earlier access is no longer live, or was reused for
      // this task.
      const Entry& e = entries_[dropped];
      if (!e.live || e.task == task) return;
      if (index == kNone && e.write && near_[dropped].lo == lo && near_[dropped].hi == hi) {
        index = dropped;
      } else {
        unlink(dropped);
      }
    };
    if (write && a.region.contiguous()) {
      if (covered != nullptr && a.tag != ArgTag::kOutput) {
        // Found by find_dependencies before any entry of this task was recorded.
        const auto& c = *covered;
        while (next_covered < c.size() && c[next_covered].first < ai) ++next_covered;
        for (; next_covered < c.size() && c[next_covered].first == ai; ++next_covered) {
          drop(c[next_covered].second);
        }
      } else {
        gather_near(lo, hi, false);
        for (std::uint32_t found : near_found_) {
          const bool covers = lo <= near_[found].lo && near_[found].hi <= hi;
          if (covers && !entries_[found].creator) drop(found);
        }
      }
    }
    if (index != kNone) {  // taken over: a write of the same bounding range, now this task's
      Entry& e = entries_[index];
      e.task = task;
      e.owner = owner;
      e.creator = a.tag == ArgTag::kOutput;
      e.contiguous = true;  // it may have been a strided write within the range
      handles->push_back(index);
      continue;
    }
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<std::uint32_t>(entries_.size());
      entries_.emplace_back();
      near_.emplace_back();
      strided_.emplace_back();
    }
    Entry& e = entries_[index];
    e.contiguous = a.region.contiguous();
    if (!e.contiguous) strided_[index] = a.region;
    Near& n = near_[index];
    n.lo = lo;
    n.hi = hi;
    e.task = task;
    e.owner = owner;
    e.write = write;
    e.creator = a.tag == ArgTag::kOutput;
    e.size_class = static_cast<std::uint8_t>(class_of(lo, hi));
    insert(index);
    handles->push_back(index);
  }
}

void TensorMap::find(std::span<const TensorAccess> accesses, std::vector<FoundDependency>* found) {
  find_dependencies(accesses, found, nullptr);
}

void TensorMap::record(TaskId task, TaskSlot* owner, std::span<const TensorAccess> accesses,
                       std::vector<std::uint32_t>* handles) {
  record_accesses(task, owner, accesses, nullptr, handles);
}

// Flattened (every call inside inlined): the submit path's one call into the map. Inlining
// bucket_to_insert alone does not give what this does (bench/runtime/RESULTS.md has the counts).
[[gnu::flatten]] void TensorMap::find_and_record(TaskId task, TaskSlot* owner,
                                                 std::span<const TensorAccess> accesses,
                                                 std::vector<FoundDependency>* found,
                                                 std::vector<std::uint32_t>* handles) {
  covered_.clear();
  find_dependencies(accesses, found, &covered_);
  record_accesses(task, owner, accesses, &covered_, handles);
}

// Flattened: unlink() inline (a call per entry saved six registers: stores, which bind the
// submitting thread).
[[gnu::flatten]] void TensorMap::remove(TaskId task, std::span<const std::uint32_t> handles) {
  for (std::uint32_t index : handles) {
    if (index < entries_.size() && entries_[index].live && entries_[index].task == task)
      unlink(index);
  }
}

}  // namespace hp::runtime
