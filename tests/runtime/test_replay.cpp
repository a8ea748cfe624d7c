// Replay of a recorded deps.json: the same tasks with the recorded edges and no inference, on a
// chip of another shape, give the recorded run's outputs bit for bit, and the replay's own
// graph holds exactly the recorded edges (as explicit ones).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <utility>

#include "diagnostics_fixture.h"
#include "runtime/replay.h"

namespace hp::runtime::testing {
namespace {

using ::testing::HasSubstr;

class RuntimeReplay : public DiagnosticsTest {
 protected:
  // A DAG over a, b, c and runtime OUTPUTs in nested scopes: per round, fill a chunk of a,
  // copy it into a fresh OUTPUT, add the round to the OUTPUT, copy that into b's chunk; then c
  // = b (a WAR on b by the next round's copy is ordered by inference).
  Status program(Orchestrator& o, std::vector<std::int32_t>& a, std::vector<std::int32_t>& b,
                 std::vector<std::int32_t>& c) {
    for (int round = 0; round < 6; ++round) {
      auto scope = o.scope();
      const std::int64_t chunk[] = {8};
      const TensorView a_part(a.data() + 8 * (round % 3), DType::kInt32, chunk);
      const TensorView b_part(b.data() + 8 * (round % 3), DType::kInt32, chunk);
      HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(a_part).scalar(round + 1)));
      SubmitResult t;
      HP_RETURN_IF_ERROR(o.submit(copy, TaskArgs().input(a_part).output(DType::kInt32, {8}), &t));
      HP_RETURN_IF_ERROR(o.submit(add_scalar, TaskArgs().inout(t.outputs[0]).scalar(100 * round)));
      HP_RETURN_IF_ERROR(o.submit(copy, TaskArgs().input(t.outputs[0]).output_existing(b_part)));
      HP_RETURN_IF_ERROR(o.submit(copy, TaskArgs().input(i32(b)).output_existing(i32(c))));
    }
    return Status::ok();
  }
  static std::set<std::pair<std::string, std::string>> edges(const Json& doc) {
    std::set<std::pair<std::string, std::string>> out;
    for (const Json& e : doc.at("edges")) {
      out.insert({e.at("pred").get<std::string>(), e.at("succ").get<std::string>()});
    }
    return out;
  }
};

TEST_F(RuntimeReplay, ARecordedRunReplaysToTheSameOutputsOnAnotherChip) {
  config.diagnostics.dep_gen = true;
  std::vector<std::int32_t> a(24, 0), b(24, 0), c(24, 0);
  ASSERT_TRUE(run([&](Orchestrator& o) { return program(o, a, b, c); }).is_ok());
  const Json recorded = read_json(kDepsFile);
  ASSERT_FALSE(edges(recorded).empty());

  // Fresh buffers, a chip of another shape, and the recorded addresses rebased onto them.
  std::unique_ptr<ChipWorker> other;
  ASSERT_TRUE(ChipWorker::create({.num_cube = 2, .num_vector = 4}, &other).is_ok());
  ReplayBindings bindings;
  for (const auto& [name, slot] : {std::pair{"fill", fill}, {"copy", copy}, {"add", add_scalar}}) {
    std::shared_ptr<const Callable> c;
    ASSERT_TRUE(worker->callable(slot, &c).is_ok());
    ASSERT_TRUE(other->register_callable(*c, &bindings.callables[name]).is_ok());
  }
  std::vector<std::int32_t> a2(24, -7), b2(24, -7), c2(24, -7);
  for (auto [from, to] : {std::pair{&a, &a2}, {&b, &b2}, {&c, &c2}}) {
    bindings.buffers.push_back({reinterpret_cast<std::uintptr_t>(from->data()),
                                from->size() * sizeof(std::int32_t), to->data()});
  }
  OrchestratorConfig replay_config;
  replay_config.diagnostics = {.output_prefix = dir + "/replayed", .dep_gen = true};
  const Status s = replay(*other, out(kDepsFile), bindings, replay_config);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(a2, a);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(c2, c);
  // Its graph: the recorded edges, every one explicit.
  Json replayed;
  ASSERT_TRUE(read_json_file(dir + "/replayed/deps.json", &replayed).is_ok());
  EXPECT_EQ(edges(replayed), edges(recorded));
  for (const Json& e : replayed.at("edges")) EXPECT_EQ(e.at("source"), "explicit");
  EXPECT_EQ(replayed.at("tasks").size(), recorded.at("tasks").size());
}

TEST_F(RuntimeReplay, MissingCallablesAndBadFilesAreNamed) {
  config.diagnostics.dep_gen = true;
  std::vector<std::int32_t> a(24, 0), b(24, 0), c(24, 0);
  ASSERT_TRUE(run([&](Orchestrator& o) { return program(o, a, b, c); }).is_ok());
  ReplayBindings bindings;
  bindings.callables["fill"] = fill;
  Status s = replay(*worker, out(kDepsFile), bindings);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("callable 'copy'"));
  const std::string bad = dir + "/bad.json";
  ASSERT_TRUE(write_json_file(bad, Json::parse(R"({"schema_version": 1, "tasks": 3})")).is_ok());
  s = replay(*worker, bad, bindings);
  EXPECT_EQ(s.code(), ErrorCode::kCorruptData) << s.to_string();
  s = replay(*worker, dir + "/missing.json", bindings);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound) << s.to_string();
}

// A recorded file is input like any other: scopes whose parents loop, or a scope site whose
// line is not a number, are CORRUPT_DATA from the reading, not a replay that never ends or an
// exception out of the orchestration.
TEST_F(RuntimeReplay, LoopingScopesAndBadScopeSitesAreCorruptData) {
  config.diagnostics.dep_gen = true;
  std::vector<std::int32_t> a(24, 0), b(24, 0), c(24, 0);
  ASSERT_TRUE(run([&](Orchestrator& o) { return program(o, a, b, c); }).is_ok());
  ReplayBindings bindings;
  for (const auto& [name, slot] : {std::pair{"fill", fill}, {"copy", copy}, {"add", add_scalar}}) {
    bindings.callables[name] = slot;
  }
  const Json recorded = read_json(kDepsFile);
  ASSERT_GE(recorded.at("scopes").size(), 3u);
  const std::string file = dir + "/edited.json";

  Json looping = recorded;  // two scopes, each the other's parent
  Json& scopes = looping.at("scopes");
  const std::string first = scopes.at(1).at("id"), second = scopes.at(2).at("id");
  scopes.at(1)["parent"] = second;
  scopes.at(2)["parent"] = first;
  ASSERT_TRUE(write_json_file(file, looping).is_ok());
  Status s = replay(*worker, file, bindings);
  EXPECT_EQ(s.code(), ErrorCode::kCorruptData) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("scope"));

  Json bad_site = recorded;
  bad_site.at("scopes").at(1)["site"] = "program.cpp:line";
  ASSERT_TRUE(write_json_file(file, bad_site).is_ok());
  s = replay(*worker, file, bindings);
  EXPECT_EQ(s.code(), ErrorCode::kCorruptData) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("program.cpp:line"));
}

}  // namespace
}  // namespace hp::runtime::testing
