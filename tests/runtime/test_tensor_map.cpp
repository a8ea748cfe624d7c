// TensorMap: the indexed map finds exactly what a scan of every entry finds (the rules of
// tensor_map.h), whatever the regions' sizes, layouts and addresses, as entries come and go.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "runtime/tensor_map.h"

namespace hp::runtime {
namespace {

// The rules of tensor_map.h over a plain list of entries.
class ScanMap {
 public:
  void find(std::span<const TensorAccess> accesses, std::vector<FoundDependency>* found) const {
    for (const TensorAccess& a : accesses) {
      if (a.tag == ArgTag::kOutput || a.region.empty()) continue;
      for (const Entry& e : entries_) {
        const bool no_dep = a.tag == ArgTag::kNoDep;
        if (no_dep && !e.creator) continue;
        if (!overlaps(a.region, e.region)) continue;
        FoundDependency f;
        f.dep.pred = e.task;
        f.dep.arg_index = a.arg_index;
        f.dep.source = e.creator ? DepSource::kCreator : DepSource::kTensorMap;
        f.keeps_alive = e.creator;
        f.orders = !no_dep;
        switch (a.tag) {
          case ArgTag::kInput:
            if (!e.write) f.orders = false;
            f.dep.kind = DepKind::kRaw;
            break;
          case ArgTag::kInOut:
            f.dep.kind = e.write ? DepKind::kRaw : DepKind::kWar;
            break;
          case ArgTag::kOutputExisting:
            f.dep.kind = e.write ? DepKind::kWaw : DepKind::kWar;
            break;
          default:
            f.dep.kind = DepKind::kRaw;
            break;
        }
        if (f.orders || f.keeps_alive) found->push_back(f);
      }
    }
  }
  void record(TaskId task, std::span<const TensorAccess> accesses) {
    for (const TensorAccess& a : accesses) {
      if (a.tag == ArgTag::kNoDep || a.region.empty()) continue;
      const bool write = a.tag != ArgTag::kInput;
      if (write && a.region.contiguous()) {
        std::erase_if(entries_, [&](const Entry& e) {
          return !e.creator && e.task != task && covers(a.region, e.region);
        });
      }
      entries_.push_back({a.region, task, write, a.tag == ArgTag::kOutput});
    }
  }
  void remove(TaskId task) {
    std::erase_if(entries_, [&](const Entry& e) { return e.task == task; });
  }
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    TensorRegion region;
    TaskId task;
    bool write, creator;
  };
  std::vector<Entry> entries_;
};

using Finding = std::tuple<TaskId, int, DepKind, DepSource, bool, bool>;

std::multiset<Finding> findings(const std::vector<FoundDependency>& found) {
  std::multiset<Finding> out;
  for (const FoundDependency& f : found) {
    out.insert({f.dep.pred, f.dep.arg_index, f.dep.kind, f.dep.source, f.orders, f.keeps_alive});
  }
  return out;
}

TaskSlot* owner_of(TaskId task) { return reinterpret_cast<TaskSlot*>((task + 1) * 64); }

// Tasks of 1 to 4 accesses to views from `view()`, every tag: the map finds what the scan
// finds, through both of its forms, as tasks retire out of order (each removed twice: the second
// removal changes nothing).
template <typename ViewFn>
void check_against_scan(ViewFn&& view, std::mt19937_64& rng) {
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const ArgTag tags[] = {ArgTag::kInput,          ArgTag::kInput, ArgTag::kInOut,
                         ArgTag::kOutputExisting, ArgTag::kNoDep, ArgTag::kOutput};
  TensorMap map;
  ScanMap scan;
  std::vector<std::pair<TaskId, std::vector<std::uint32_t>>> live;
  for (TaskId task = 0; task < 3000; ++task) {
    std::vector<TensorAccess> accesses;
    const int n = static_cast<int>(uniform(1, 4));
    for (int i = 0; i < n; ++i) {
      const ArgTag tag = tags[uniform(0, 5)];
      accesses.push_back({TensorRegion::of(view()), tag, i});
    }
    std::vector<FoundDependency> indexed, scanned;
    std::vector<std::uint32_t> handles;
    if (task % 2 == 0) {
      map.find(accesses, &indexed);
      map.record(task, owner_of(task), accesses, &handles);
    } else {  // the one-pass form the scheduler uses
      map.find_and_record(task, owner_of(task), accesses, &indexed, &handles);
    }
    scan.find(accesses, &scanned);
    ASSERT_EQ(findings(indexed), findings(scanned)) << "task " << task;
    for (const FoundDependency& f : indexed) ASSERT_EQ(f.pred, owner_of(f.dep.pred));
    scan.record(task, accesses);
    live.push_back({task, handles});
    // Retire tasks out of order now and then, as slots of different rings are reclaimed.
    while (live.size() > 200 || (!live.empty() && uniform(0, 3) == 0)) {
      const std::size_t victim =
          static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(live.size()) - 1));
      map.remove(live[victim].first, live[victim].second);
      const std::size_t left = map.size();
      map.remove(live[victim].first, live[victim].second);  // again
      ASSERT_EQ(map.size(), left) << "task " << live[victim].first;
      scan.remove(live[victim].first);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    ASSERT_EQ(map.size(), scan.size()) << "task " << task;
  }
  for (auto& [task, handles] : live) map.remove(task, handles);
  EXPECT_EQ(map.size(), 0u);
}

TEST(RuntimeTensorMap, FindsWhatAScanOfEveryEntryFinds) {
  // A 1 MiB arena: views from 1 byte to the whole arena, 2-D strided tiles, every tag.
  std::vector<std::byte> arena(1 << 20);
  std::mt19937_64 rng(7);
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  auto random_view = [&]() -> TensorView {
    const std::int64_t size = arena.size();
    switch (uniform(0, 3)) {
      case 0: {  // small: a few elements
        const std::int64_t n = uniform(1, 16), at = uniform(0, size - n);
        return TensorView(arena.data() + at, DType::kInt8, {n});
      }
      case 1: {  // medium
        const std::int64_t n = uniform(1, 8192), at = uniform(0, size - n);
        return TensorView(arena.data() + at, DType::kInt8, {n});
      }
      case 2: {  // a tile of a 1024 x 1024 byte matrix
        const std::int64_t rows = uniform(1, 64), cols = uniform(1, 64);
        const std::int64_t r = uniform(0, 1024 - rows), c = uniform(0, 1024 - cols);
        return TensorView(arena.data() + r * 1024 + c, DType::kInt8,
                          std::vector<std::int64_t>{rows, cols},
                          std::vector<std::int64_t>{1024, 1});
      }
      default: {  // large, up to the whole arena
        const std::int64_t n = uniform(1, size), at = uniform(0, size - n);
        return TensorView(arena.data() + at, DType::kInt8, {n});
      }
    }
  };
  check_against_scan(random_view, rng);
}

// Rewrites of the same few regions (the chain's and the random DAG's pattern), where a write
// takes over an entry of exactly its range in place; a strided view shares its bounding range
// with a contiguous one.
TEST(RuntimeTensorMap, RewritesOfTheSameRegionsAgreeWithTheScan) {
  std::vector<std::byte> arena(4096);
  std::mt19937_64 rng(11);
  const std::vector<TensorView> pool = {
      TensorView(arena.data(), DType::kInt8, {56}),
      TensorView(arena.data(), DType::kInt8, std::vector<std::int64_t>{4, 8},
                 std::vector<std::int64_t>{16, 1}),
      TensorView(arena.data() + 8, DType::kInt8,
                 {8}),  // in the contiguous view only, between the tile's rows
      TensorView(arena.data() + 64, DType::kInt32, {16}),
      TensorView(arena.data() + 128, DType::kInt32, {16}),
      TensorView(arena.data() + 128, DType::kInt8, {32}),
      TensorView(arena.data(), DType::kInt8, {4096}),
  };
  auto pick = [&]() {
    return pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(rng)];
  };
  check_against_scan(pick, rng);
}

TEST(RuntimeTensorMap, ManyReadersOfOneBufferAndAWholeBufferReader) {
  // The fan-out/fan-in shape: one write, many reads of it, many element writes, one reader of
  // all the elements.
  std::vector<std::int32_t> x(1), y(1000);
  TensorMap map;
  std::vector<std::uint32_t> handles;
  const TensorAccess source[] = {
      {TensorRegion::of(TensorView(x.data(), DType::kInt32, {1})), ArgTag::kOutputExisting, 0}};
  map.record(0, owner_of(0), source, &handles);
  for (TaskId j = 0; j < 1000; ++j) {
    const TensorAccess middle[] = {
        {TensorRegion::of(TensorView(x.data(), DType::kInt32, {1})), ArgTag::kInput, 0},
        {TensorRegion::of(TensorView(y.data() + j, DType::kInt32, {1})), ArgTag::kOutputExisting,
         1}};
    std::vector<FoundDependency> found;
    map.find(middle, &found);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].dep.pred, 0u);
    map.record(1 + j, owner_of(1 + j), middle, &handles);
  }
  const TensorAccess sink[] = {
      {TensorRegion::of(TensorView(y.data(), DType::kInt32, {1000})), ArgTag::kInput, 0}};
  std::vector<FoundDependency> found;
  map.find(sink, &found);
  std::set<TaskId> preds;
  for (const FoundDependency& f : found) preds.insert(f.dep.pred);
  EXPECT_EQ(preds.size(), 1000u);
  EXPECT_EQ(*preds.begin(), 1u);
  // A writer of x is ordered after the source and every reader.
  const TensorAccess next[] = {
      {TensorRegion::of(TensorView(x.data(), DType::kInt32, {1})), ArgTag::kOutputExisting, 0}};
  found.clear();
  map.find(next, &found);
  EXPECT_EQ(found.size(), 1001u);
  // ... and its write covers all of them.
  map.record(2000, owner_of(2000), next, &handles);
  EXPECT_EQ(map.size(), 1000u + 1u);  // the element writes and the new write
}

// A stream of writes to fresh buffers with a few tasks live at a time (the fan-out's stages):
// a bucket leaves the table with its last entry, so the table stays sized to what is live.
TEST(RuntimeTensorMap, TheTableHoldsOnlyLiveBuckets) {
  std::vector<std::int32_t> arena(100000);
  TensorMap map;
  std::vector<std::vector<std::uint32_t>> handles(100000);
  for (TaskId t = 0; t < 100000; ++t) {
    const TensorAccess write[] = {
        {TensorRegion::of(TensorView(arena.data() + t, DType::kInt32, {1})),
         ArgTag::kOutputExisting, 0}};
    map.record(t, owner_of(t), write, &handles[t]);
    if (t >= 16) map.remove(t - 16, handles[t - 16]);
    ASSERT_LE(map.table_slots(), 128u) << "task " << t;
  }
}

}  // namespace
}  // namespace hp::runtime
