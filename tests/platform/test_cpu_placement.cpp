// The CPU topology (hwloc, synthetic and this system's), the rank placement and the
// framework/chip partition (docs/platform.md, "Topology and placement"), and binding memory to
// a NUMA node on this machine.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/settings.h"
#include "platform/cpu_affinity.h"
#include "platform/cpu_placement.h"
#include "platform/cpu_topology.h"
#include "platform/memory_binding.h"

namespace hp::platform {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CpuTopology synthetic(const char* description) {
  CpuTopology t;
  const Status s = synthetic_cpu_topology(description, &t);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return t;
}

std::vector<int> range(int begin, int end, int step = 1) {
  std::vector<int> out;
  for (int i = begin; i < end; i += step) out.push_back(i);
  return out;
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Two packages of two nodes of eight two-thread cores: core c holds CPUs 2c and 2c+1.
constexpr const char* kTwoSockets = "package:2 numa:2 core:8 pu:2";

TEST(CpuTopology, SyntheticIsReadNodeByNode) {
  const CpuTopology t = synthetic(kTwoSockets);
  EXPECT_EQ(t.source, std::string("synthetic: ") + kTwoSockets);
  EXPECT_TRUE(t.is_synthetic());
  EXPECT_EQ(t.packages, 2);
  ASSERT_EQ(t.nodes.size(), 4u);
  EXPECT_EQ(t.core_count(), 32);
  EXPECT_EQ(t.cpu_count(), 64);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(t.nodes[k].os_index, k);
    ASSERT_EQ(t.nodes[k].cores.size(), 8u);
    EXPECT_THAT(t.nodes[k].cores[0].cpus, ElementsAre(16 * k, 16 * k + 1));
  }
}

TEST(CpuTopology, ARejectedDescriptionIsInvalidArgument) {
  CpuTopology t;
  const Status s = synthetic_cpu_topology("socket:two", &t);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("socket:two"));
}

TEST(CpuTopology, ThisSystemHoldsExactlyTheAllowedCpus) {
  unsetenv("HWLOC_SYNTHETIC");
  CpuTopology t;
  ASSERT_TRUE(load_cpu_topology(&t).is_ok());
  EXPECT_EQ(t.source, "this system");
  EXPECT_FALSE(t.is_synthetic());
  std::vector<int> allowed;
  ASSERT_TRUE(allowed_cpus(&allowed).is_ok());
  std::vector<int> seen = cores_first(t.cores());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, allowed);
}

TEST(CpuTopology, HwlocSyntheticReplacesThisSystem) {
  setenv("HWLOC_SYNTHETIC", "numa:3 core:2 pu:1", 1);
  CpuTopology t;
  const Status ok = load_cpu_topology(&t);
  setenv("HWLOC_SYNTHETIC", "numa:x", 1);
  CpuTopology bad_topology;
  const Status bad = load_cpu_topology(&bad_topology);
  unsetenv("HWLOC_SYNTHETIC");
  ASSERT_TRUE(ok.is_ok()) << ok.to_string();
  EXPECT_TRUE(t.is_synthetic());
  EXPECT_EQ(t.nodes.size(), 3u);
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidSetting);
  EXPECT_THAT(bad.message(), HasSubstr("HWLOC_SYNTHETIC"));
}

TEST(PlaceRanks, OneRankPerNodeWhenTheCountsMatch) {
  const auto p = place_ranks(synthetic(kTwoSockets), 4);
  ASSERT_EQ(p.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    // Cores first (each core's first thread), SMT siblings last.
    EXPECT_EQ(p[k].cpus, concat(range(16 * k, 16 * k + 16, 2), range(16 * k + 1, 16 * k + 16, 2)));
    EXPECT_THAT(p[k].mem_nodes, ElementsAre(k));
  }
}

TEST(PlaceRanks, FewerRanksThanNodesTakeWholeNodes) {
  const auto two = place_ranks(synthetic(kTwoSockets), 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].cpus, concat(range(0, 32, 2), range(1, 32, 2)));
  EXPECT_THAT(two[0].mem_nodes, ElementsAre(0, 1));
  EXPECT_THAT(two[1].mem_nodes, ElementsAre(2, 3));
  const auto three = place_ranks(synthetic(kTwoSockets), 3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_THAT(three[0].mem_nodes, ElementsAre(0));
  EXPECT_THAT(three[1].mem_nodes, ElementsAre(1));
  EXPECT_THAT(three[2].mem_nodes, ElementsAre(2, 3));
  EXPECT_EQ(three[2].cpus.size(), 32u);
}

TEST(PlaceRanks, MoreRanksThanNodesSplitEachNodesCores) {
  const auto p = place_ranks(synthetic(kTwoSockets), 6);  // nodes get 2, 2, 1, 1 ranks
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p[0].cpus, concat(range(0, 8, 2), range(1, 8, 2)));
  EXPECT_EQ(p[1].cpus, concat(range(8, 16, 2), range(9, 16, 2)));
  EXPECT_THAT(p[1].mem_nodes, ElementsAre(0));
  EXPECT_THAT(p[2].mem_nodes, ElementsAre(1));
  EXPECT_THAT(p[4].mem_nodes, ElementsAre(2));
  EXPECT_EQ(p[4].cpus.size(), 16u);
  EXPECT_THAT(p[5].mem_nodes, ElementsAre(3));
}

TEST(PlaceRanks, ANodeWithFewerCoresThanRanksSplitsItsThreads) {
  const auto p = place_ranks(synthetic("numa:1 core:2 pu:2"), 3);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_THAT(p[0].cpus, ElementsAre(0));  // cores first: 0, 2, then the siblings 1, 3
  EXPECT_THAT(p[1].cpus, ElementsAre(2));
  EXPECT_THAT(p[2].cpus, ElementsAre(1, 3));
  EXPECT_TRUE(p[0].mem_nodes.empty());  // one node: nothing to bind
  const auto many = place_ranks(synthetic("numa:1 core:2 pu:1"), 5);
  ASSERT_EQ(many.size(), 5u);
  for (int r = 0; r < 5; ++r) EXPECT_THAT(many[r].cpus, ElementsAre(r % 2));
}

// Whatever the machine: every rank gets CPUs; with no more ranks than CPUs the shares are
// disjoint and cover every CPU; with no more ranks than cores no core is split and every
// core's first thread comes before any sibling.
TEST(PlaceRanks, InvariantsOnManyTopologies) {
  for (const char* d : {kTwoSockets, "numa:1 core:4 pu:1", "package:1 numa:3 core:5 pu:2",
                        "package:4 numa:1 core:3 pu:4", "numa:2 core:1 pu:1"}) {
    const CpuTopology t = synthetic(d);
    for (int n = 1; n <= 40; ++n) {
      SCOPED_TRACE(std::string(d) + ", " + std::to_string(n) + " ranks");
      const auto p = place_ranks(t, n);
      ASSERT_EQ(p.size(), std::size_t(n));
      std::multiset<int> used;
      for (const auto& r : p) {
        ASSERT_FALSE(r.cpus.empty());
        used.insert(r.cpus.begin(), r.cpus.end());
        EXPECT_EQ(r.mem_nodes.empty(), t.nodes.size() == 1);
      }
      if (n > t.cpu_count()) continue;
      EXPECT_EQ(used.size(), std::size_t(t.cpu_count()));
      EXPECT_EQ(std::set<int>(used.begin(), used.end()).size(), used.size());
      if (n > t.core_count()) continue;
      for (const auto& r : p) {
        std::set<int> firsts, all(r.cpus.begin(), r.cpus.end());
        for (const auto& core : t.cores()) {
          if (all.count(core.cpus[0])) {
            firsts.insert(core.cpus[0]);
            for (int c : core.cpus) EXPECT_TRUE(all.count(c)) << "core of CPU " << c << " is split";
          }
        }
        for (std::size_t i = 0; i < firsts.size(); ++i) EXPECT_TRUE(firsts.count(r.cpus[i]));
      }
    }
  }
}

TEST(PartitionCpus, HalvesTheCoresWithTheirSiblings) {
  const CpuPartition two_nodes = partition_cpus(synthetic("numa:2 core:4 pu:2"));
  EXPECT_EQ(two_nodes.framework, concat(range(0, 8, 2), range(1, 8, 2)));
  EXPECT_EQ(two_nodes.chip, concat(range(8, 16, 2), range(9, 16, 2)));
  const CpuPartition odd = partition_cpus(synthetic("numa:1 core:3 pu:1"));
  EXPECT_THAT(odd.framework, ElementsAre(0));
  EXPECT_THAT(odd.chip, ElementsAre(1, 2));
}

TEST(PartitionCpus, OneCoreSplitsItsThreadsAndOneCpuIsShared) {
  const CpuPartition smt = partition_cpus(synthetic("numa:1 core:1 pu:2"));
  EXPECT_THAT(smt.framework, ElementsAre(0));
  EXPECT_THAT(smt.chip, ElementsAre(1));
  const CpuPartition one = partition_cpus(synthetic("numa:1 core:1 pu:1"));
  EXPECT_THAT(one.framework, ElementsAre(0));
  EXPECT_THAT(one.chip, ElementsAre(0));
}

// ---- memory binding, on this machine's first node ----

struct Mapping {
  std::size_t bytes = 1u << 20;
  void* addr = nullptr;
  explicit Mapping(int fd = -1) {
    addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
    EXPECT_NE(addr, MAP_FAILED);
  }
  ~Mapping() { munmap(addr, bytes); }
};

int first_node() {
  unsetenv("HWLOC_SYNTHETIC");
  CpuTopology t;
  EXPECT_TRUE(load_cpu_topology(&t).is_ok());
  return t.nodes.at(0).os_index;
}

TEST(BindMemory, BindsAnAnonymousMapping) {
  const int node = first_node();
  Mapping m;
  std::vector<int> nodes = {42};
  ASSERT_TRUE(memory_binding(m.addr, &nodes).is_ok());
  EXPECT_TRUE(nodes.empty());  // the default policy
  const Status s = bind_memory(m.addr, m.bytes, std::vector<int>{node});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  static_cast<volatile char*>(m.addr)[0] = 1;
  ASSERT_TRUE(memory_binding(m.addr, &nodes).is_ok());
  EXPECT_THAT(nodes, ElementsAre(node));
}

TEST(BindMemory, ASharedMappingsPolicyIsTheObjects) {
  const int node = first_node();
  const int fd = memfd_create("hp-bind-test", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  {
    Mapping creator(fd), other(fd);
    ASSERT_TRUE(bind_memory(creator.addr, creator.bytes, std::vector<int>{node}).is_ok());
    std::vector<int> nodes;
    ASSERT_TRUE(memory_binding(other.addr, &nodes).is_ok());
    EXPECT_THAT(nodes, ElementsAre(node));
  }
  close(fd);
}

TEST(BindMemory, ANodeThatDoesNotExistIsInvalidArgument) {
  Mapping m;
  for (int node : {1023, 5000, -1}) {
    const Status s = bind_memory(m.addr, m.bytes, std::vector<int>{node});
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << node << ": " << s.to_string();
    EXPECT_THAT(s.message(), HasSubstr(std::to_string(node)));
  }
  EXPECT_EQ(bind_memory(m.addr, m.bytes, {}).code(), ErrorCode::kInvalidArgument);
}

TEST(FormatCpuList, RunsInTheOrderGiven) {
  EXPECT_EQ(format_cpu_list(std::vector<int>{0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list(std::vector<int>{0, 2, 4, 1, 3, 5}), "0,2,4,1,3,5");
  EXPECT_EQ(format_cpu_list(std::vector<int>{4, 5, 6, 0, 1}), "4-6,0-1");
  EXPECT_EQ(format_cpu_list(std::vector<int>{}), "");
  std::vector<int> back;
  ASSERT_TRUE(parse_cpu_list("4-6,0-1", &back).is_ok());
  EXPECT_THAT(back, ElementsAre(4, 5, 6, 0, 1));
}

}  // namespace
}  // namespace hp::platform
