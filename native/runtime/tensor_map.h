// TensorMap: which earlier tasks touched which memory, for inferring a new task's dependencies
// from its tensor arguments (orchestration thread only; not thread-safe).
//
// Each recorded access is an entry {region, task, write?, creator?}. For a new access A and an
// entry E whose regions overlap (tensor_region.h):
//   A INPUT            E writes -> RAW
//   A INOUT            E writes -> RAW, E only reads -> WAR
//   A OUTPUT_EXISTING  E writes -> WAW, E only reads -> WAR
//   A OUTPUT           nothing (fresh memory from the heap ring)
//   A NO_DEP           no ordering; but when E created the memory (an OUTPUT), the new task
//                      keeps E's memory alive until it completes (keeps_alive)
// Every access that overlaps a creator entry keeps the creator's memory alive too.
// A write with a contiguous region drops older non-creator entries it covers: whoever touches
// that memory later overlaps the new write and is ordered after it, hence after them. Creator
// entries stay until their task retires (they carry the memory's lifetime). The owner removes a
// task's entries when its slot is reclaimed (remove()). A dropped write entry of exactly the new
// write's range is taken over in place (same bucket and list; its old task's remove() skips it):
// a buffer rewritten task after task then costs no unlink and insert.
//
// Index (so that a lookup costs what it finds, not what the map holds): an entry of bounding
// range [lo, hi) belongs to size class k, the smallest k >= kMinClass with hi - lo <= 2^k, and
// sits in the bucket (k, lo >> k) of a hash table. Such an entry can overlap [a, b) only if
// lo >> k lies in [(a >> k) - 1, (b - 1) >> k], so a lookup visits those buckets of each class
// in use; when a class holds fewer entries than a few per bucket to visit, it walks the class's
// list instead. When no entry of a class straddles a granule boundary (lo >> k == (hi - 1) >> k:
// an aligned tensor no longer than 2^k), the bucket before (a >> k) cannot overlap and is skipped.
// A bucket keeps reads and writes in two lists: an INPUT (or NO_DEP) lookup never walks the readers
// that pile up on a buffer many tasks read, and a lookup of both finds both lists with one probe of
// the table. The table is open addressing with linear probing; a bucket whose lists empty leaves it
// at once (backward-shift deletion: no tombstones, so probe paths stay short and the table never
// needs a rebuild to shed dead buckets; it only doubles when a quarter full: at half, probes are
// long enough to be a visible part of a fan-out's inserts). The head entry of each list knows its
// bucket's position, so an unlink does not probe.
// Rejected: one list scanned per lookup (quadratic in the tasks in flight), an ordered map by
// address (a node allocation per entry, and long regions defeat its range bound), emptied buckets
// kept until a rebuild (a fan-out over fresh buffers would rebuild the table every few thousand
// tasks).
#ifndef HYPER_PARALLEL_RUNTIME_TENSOR_MAP_H_
#define HYPER_PARALLEL_RUNTIME_TENSOR_MAP_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/api.h"
#include "runtime/task_args.h"
#include "runtime/task_types.h"
#include "runtime/tensor_region.h"

namespace hp::runtime {

struct TaskSlot;

struct TensorAccess {
  TensorRegion region;
  ArgTag tag = ArgTag::kInput;
  int arg_index = 0;
};

struct FoundDependency {
  Dependency dep;
  TaskSlot* pred = nullptr;  // the owner recorded with the entry
  bool orders = true;        // the new task must wait for dep.pred
  bool keeps_alive = false;  // the new task holds dep.pred's memory until it completes
};

class HP_API TensorMap {  // exported for its unit test; the header is not installed
 public:
  // 4-byte buckets at least: with 64-byte ones, 16 tasks each writing one int32 of a buffer
  // would share a bucket, and every lookup near them would walk two such buckets.
  static constexpr int kMinClass = 2;

  TensorMap();
  ~TensorMap() noexcept;
  TensorMap(const TensorMap&) = delete;
  TensorMap& operator=(const TensorMap&) = delete;

  // Appends the new accesses' dependencies on the recorded entries.
  void find(std::span<const TensorAccess> accesses, std::vector<FoundDependency>* found);
  // Records the task's accesses (NO_DEP ones are not recorded), `owner` standing for the task in
  // later findings; appends the new entries' handles to `handles`.
  void record(TaskId task, TaskSlot* owner, std::span<const TensorAccess> accesses,
              std::vector<std::uint32_t>* handles);
  // find() then record(), in one pass over the entries near each access.
  void find_and_record(TaskId task, TaskSlot* owner, std::span<const TensorAccess> accesses,
                       std::vector<FoundDependency>* found, std::vector<std::uint32_t>* handles);
  // Removes the task's entries among `handles` (those already dropped are skipped).
  void remove(TaskId task, std::span<const std::uint32_t> handles);
  std::size_t size() const noexcept { return live_; }
  // The hash table's slots (for tests: it holds only buckets with entries, at most a quarter full).
  std::size_t table_slots() const noexcept { return table_.size(); }
  void clear() noexcept;

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  // What a lookup's walk reads of an entry, packed apart from the rest: a walk over a bucket's
  // or a class's entries that do not overlap the lookup touches 24 bytes of each, not the
  // entry's line.
  struct Near {
    std::uintptr_t lo = 0, hi = 0;     // copies of region.lo()/hi()
    std::uint32_t next = kNone;        // in its bucket
    std::uint32_t class_next = kNone;  // in its class list
  };
  struct Entry {  // near_[i] holds its range, strided_[i] its region when that is not one run
    TaskId task = kNoTask;
    TaskSlot* owner = nullptr;
    std::uint64_t key = 0;             // its bucket's
    std::uint32_t bucket = kNone;      // its bucket's table position, kept while it heads a list
    std::uint32_t prev = kNone;        // in its bucket's list
    std::uint32_t class_prev = kNone;  // in its class list
    std::uint8_t size_class = 0;
    bool write = false;
    bool creator = false;
    bool live = false;
    bool contiguous = true;  // its region is near_'s [lo, hi)
  };
  struct Slot {  // of the open-addressing table: a bucket's key and the heads of its lists
    std::uint64_t key;
    std::uint32_t head[2];  // [write?]
    bool empty() const noexcept { return head[0] == kNone && head[1] == kNone; }
    std::size_t home(std::size_t mask) const noexcept;  // its probe path's start
  };
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};

  static int class_of(std::uintptr_t lo, std::uintptr_t hi) noexcept;
  static std::uint64_t key_of(int size_class, std::uintptr_t granule) noexcept {
    return (static_cast<std::uint64_t>(granule) << 6) | static_cast<std::uint64_t>(size_class);
  }
  // Sets near_found_ to the live entries whose bounding range meets [lo, hi), writes only or
  // both.
  void gather_near(std::uintptr_t lo, std::uintptr_t hi, bool writes_only);
  // The accesses' dependencies; with `covered`, also the entries each contiguous write access
  // covers (pairs of access index and entry index), for record_accesses.
  void find_dependencies(std::span<const TensorAccess> accesses,
                         std::vector<FoundDependency>* found,
                         std::vector<std::pair<int, std::uint32_t>>* covered);
  // overlaps() of an access's region and entry i's.
  bool overlaps_entry(const TensorRegion& a, std::uint32_t i) const {
    return entries_[i].contiguous ? overlaps(a, TensorRegion::range(near_[i].lo, near_[i].hi))
                                  : overlaps(a, strided_[i]);
  }
  void record_accesses(TaskId task, TaskSlot* owner, std::span<const TensorAccess> accesses,
                       const std::vector<std::pair<int, std::uint32_t>>* covered,
                       std::vector<std::uint32_t>* handles);
  // The bucket, null when the table has none (a bucket holds at least one entry).
  Slot* bucket(std::uint64_t key) noexcept;
  // The key's bucket's position, the bucket added when there is none.
  std::uint32_t bucket_to_insert(std::uint64_t key);
  void insert(std::uint32_t index);
  void unlink(std::uint32_t index);
  // Puts a bucket (not in the table yet) in the table, doubling it first when a quarter full.
  std::uint32_t table_put(const Slot& slot);
  // Places a bucket at position i of the table, telling its lists' heads.
  void place(std::size_t i, const Slot& slot) noexcept;
  void erase_bucket(std::size_t i) noexcept;  // backward-shift deletion
  void grow();

  std::vector<Entry> entries_;
  std::vector<Near> near_;  // parallel to entries_
  // Parallel to entries_, set and read only for entries whose region is not one run: most are,
  // and an entry then stays a line (a region with its dims is three).
  std::vector<TensorRegion> strided_;
  std::vector<std::uint32_t> free_;
  std::vector<Slot> table_;  // power-of-two size
  std::size_t table_used_ = 0;
  std::size_t live_ = 0;
  // Per [write?][class]: the class list's first entry and its length.
  std::uint32_t class_head_[2][64];
  std::uint32_t class_count_[2][64];
  std::uint32_t class_straddling_[2][64];  // entries whose range crosses a granule boundary
  static bool straddles(const Near& n, int size_class) noexcept {
    return (n.lo >> size_class) != ((n.hi - 1) >> size_class);
  }
  std::uint64_t classes_in_use_[2] = {0, 0};  // bit k: class k non-empty
  std::vector<std::uint32_t> near_found_;     // gather_near's
  std::vector<std::pair<int, std::uint32_t>> covered_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_TENSOR_MAP_H_
