// The fused MoE layer's workspace plan: the region sizes, the execution path from the
// problem, no two regions live at once overlapping (with and without reuse), and reuse saving
// exactly what it reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "moe/workspace_plan.h"

namespace hp::moe {
namespace {

MoeTiling plan(const MoeProblem& p) {
  MoeTiling t;
  const Status s = plan_moe(p, &t);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return t;
}

const WorkspaceRegion& region(const std::vector<WorkspaceRegion>& regions,
                              const std::string& name) {
  return *std::find_if(regions.begin(), regions.end(),
                       [&](const WorkspaceRegion& r) { return r.name == name; });
}

TEST(WorkspacePlan, SeedFormulasForQwenLikeShapes) {
  // H = 2048, I = 768, top-8 of 32 experts over 4 ranks, 256 tokens per rank, no reuse.
  const MoeProblem p{.tokens = 256,
                     .hidden = 2048,
                     .intermediate = 768,
                     .topk = 8,
                     .experts = 32,
                     .ranks = 4,
                     .reuse = false};
  const MoeTiling t = plan(p);
  EXPECT_EQ(t.path, MoePath::kDeep);
  EXPECT_EQ(t.exec_flags, kExecDeepFuse);
  EXPECT_EQ(t.vector_per_cube, 2);
  EXPECT_EQ(t.experts_per_rank, 8);
  EXPECT_EQ(t.max_recv_rows, 4 * 256 * 8);  // lossless: R x T x min(K, E_local)
  const auto regions = workspace_regions(p, t);
  const std::int64_t m = t.max_recv_rows;
  EXPECT_EQ(region(regions, "x1Token").bytes, m * 2048);
  EXPECT_EQ(region(regions, "x1Scale").bytes, m * 4);
  EXPECT_EQ(region(regions, "swiglu").bytes, m * 1536 * 4);
  EXPECT_EQ(region(regions, "x2Token").bytes, m * 768);
  EXPECT_EQ(region(regions, "swapSpace").bytes, m * 2048 * 4);  // max(2I, H) fp32
  // deep fuse: combine in GMM2's epilogue
  EXPECT_EQ(region(regions, "y2Token").bytes, 0);
  EXPECT_EQ(region(regions, "groupList").bytes, 8 * 8);
  EXPECT_EQ(region(regions, "expandIdx").bytes, 256 * 8 * 4);
  EXPECT_EQ(region(regions, "epSendCount").bytes, 4 * 8 * 4);
  EXPECT_EQ(region(regions, "reserved").bytes, 256 * 1024);
  EXPECT_EQ(t.saved_bytes, 0);
  EXPECT_EQ(t.total_bytes, t.user_bytes);
}

TEST(WorkspacePlan, PathsFollowTheirTriggers) {
  MoeProblem p{.tokens = 16, .hidden = 64, .intermediate = 32, .topk = 2, .experts = 4, .ranks = 4};
  MoeTiling t = plan(p);  // one expert per rank
  EXPECT_EQ(t.path, MoePath::kNonDeep);
  EXPECT_EQ(t.vector_per_cube, 1);
  EXPECT_EQ(t.exec_flags, 0u);
  EXPECT_EQ(region(workspace_regions(p, t), "y2Token").bytes, t.max_recv_rows * 64 * 2);
  p.shared_intermediate = 48;
  p.x_active_mask = p.smooth_quant = p.tensor_list = true;
  t = plan(p);
  EXPECT_EQ(t.path, MoePath::kShared);
  EXPECT_EQ(t.vector_per_cube, 2);
  EXPECT_EQ(t.exec_flags,
            kExecSharedExpert | kExecXActiveMask | kExecSmoothQuant | kExecTensorList);
  EXPECT_EQ(t.shared_tokens, 16);
  p.experts = 8;
  EXPECT_EQ(plan(p).exec_flags & kExecDeepFuse, kExecDeepFuse);
}

TEST(WorkspacePlan, CapacityAndAlignment) {
  MoeProblem p{.tokens = 100,
               .hidden = 64,
               .intermediate = 32,
               .topk = 8,
               .experts = 16,
               .ranks = 4,
               .expert_alignment = 16};
  EXPECT_EQ(plan(p).max_recv_rows, 4 * 100 * 4 + 4 * 15);  // min(K, E_local) = 4, plus padding
  p.max_recv_rows = 500;
  EXPECT_EQ(plan(p).max_recv_rows, 500);
  p.max_recv_rows = 1 << 20;
  EXPECT_EQ(plan(p).max_recv_rows, 4 * 100 * 4 + 4 * 15);  // never past the lossless bound
}

// Over a grid of problems, in both modes: every region lies inside the user part, regions whose
// live phases meet never share a byte, reuse really shares (x1 with x2), and it saves exactly
// the difference of the two totals.
TEST(WorkspacePlan, NoLiveOverlapAndReuseSavesWhatItSays) {
  int checked = 0;
  for (std::int64_t tokens : {0, 1, 7, 256}) {
    for (std::int64_t hidden : {64, 2048, 7168}) {
      for (std::int64_t inter : {96, 768}) {
        for (auto [experts, ranks] :
             {std::pair<std::int64_t, std::int64_t>{4, 4}, {32, 4}, {16, 2}}) {
          for (std::int64_t shared : {0, 384}) {
            for (std::int64_t system : {0, 1000}) {
              MoeProblem p{.tokens = tokens,
                           .hidden = hidden,
                           .intermediate = inter,
                           .topk = 4,
                           .experts = experts,
                           .ranks = ranks,
                           .expert_alignment = 8,
                           .shared_intermediate = shared,
                           .system_bytes = system};
              p.reuse = false;
              const MoeTiling separate = plan(p);
              p.reuse = true;
              const MoeTiling reused = plan(p);
              EXPECT_EQ(reused.saved_bytes, separate.total_bytes - reused.total_bytes);
              EXPECT_GE(reused.saved_bytes, 0);
              for (const MoeTiling* t : {&separate, &reused}) {
                const auto regions = workspace_regions(p, *t);
                ASSERT_EQ(regions.size(), 16u);
                const std::int64_t start = t->total_bytes - t->user_bytes;
                EXPECT_GE(start, system);
                for (const auto& a : regions) {
                  EXPECT_GE(a.offset, start) << a.name;
                  EXPECT_LE(a.offset + a.bytes, t->total_bytes) << a.name;
                  EXPECT_EQ(a.offset % 64, 0) << a.name;
                  for (const auto& b : regions) {
                    if (&a == &b || a.bytes == 0 || b.bytes == 0) continue;
                    const bool live_together =
                        a.first_phase <= b.last_phase && b.first_phase <= a.last_phase;
                    const bool share_bytes =
                        a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
                    EXPECT_FALSE(live_together && share_bytes)
                        << a.name << " and " << b.name << " overlap";
                  }
                }
                if (t == &reused && tokens > 0) {
                  // Sharing happens: some regions never live together share bytes.
                  bool shared_bytes = false;
                  for (const auto& a : regions) {
                    for (const auto& b : regions) {
                      shared_bytes |= &a != &b && a.bytes > 0 && b.bytes > 0 &&
                                      a.offset < b.offset + b.bytes &&
                                      b.offset < a.offset + a.bytes;
                    }
                  }
                  EXPECT_TRUE(shared_bytes);
                  EXPECT_GT(reused.saved_bytes, 0);
                }
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 3 * 2 * 3 * 2 * 2);
}

TEST(WorkspacePlan, BadProblemsAreNamedErrors) {
  MoeTiling t;
  MoeProblem p{.tokens = 8, .hidden = 64, .intermediate = 32, .topk = 2, .experts = 6, .ranks = 4};
  Status s = plan_moe(p, &t);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("experts"), std::string::npos) << s.to_string();
  p.experts = 8;
  p.topk = 9;
  EXPECT_EQ(plan_moe(p, &t).code(), ErrorCode::kInvalidArgument);
  p.topk = 2;
  p.hidden = 0;
  s = plan_moe(p, &t);
  EXPECT_NE(s.message().find("hidden"), std::string::npos) << s.to_string();
  p.hidden = std::int64_t(1) << 40;
  p.tokens = std::int64_t(1) << 30;
  s = plan_moe(p, &t);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("2^62"), std::string::npos) << s.to_string();
  EXPECT_EQ(plan_moe(p, nullptr).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace hp::moe
