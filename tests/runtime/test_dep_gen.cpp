// deps.json (DiagnosticsConfig::dep_gen): every field follows the schema of
// dep_graph_observer.h, and the edges are exactly the DAG a crafted program implies: RAW, WAW
// and WAR through the tensor map, RAW through a runtime OUTPUT's creator, explicit edges, and a
// partial overlap with its byte range.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "diagnostics_fixture.h"

namespace hp::runtime::testing {
namespace {

class RuntimeDepGen : public DiagnosticsTest {};

bool is_id(const Json& j) {
  return j.is_string() && !j.get<std::string>().empty() &&
         j.get<std::string>().find_first_not_of("0123456789") == std::string::npos;
}
bool is_address(const Json& j) { return j.is_string() && j.get<std::string>().rfind("0x", 0) == 0; }

TEST_F(RuntimeDepGen, EdgesAreTheProgramsDagWithKindsSourcesAndOverlaps) {
  config.diagnostics.dep_gen = true;
  std::vector<std::int32_t> a(4, 0), b(4, 0), c(4, 0);
  const std::vector<std::int64_t> half_shape = {2}, unit = {1};
  const TensorView a_tail(a.data() + 2, DType::kInt32, half_shape, unit);
  int inner_line = 0;
  const Status s = run([&](Orchestrator& o) -> Status {
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(5)));  // t0
    SubmitResult h;
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output(DType::kInt32, {4}).scalar(7), &h));  // t1
    HP_RETURN_IF_ERROR(o.submit(copy, TaskArgs().input(i32(a)).output_existing(i32(b))));     // t2
    HP_RETURN_IF_ERROR(o.submit(add_scalar, TaskArgs().inout(h.outputs[0]).scalar(1)));       // t3
    HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(9)));         // t4
    inner_line = __LINE__ + 1;
    auto scope = o.scope();
    HP_RETURN_IF_ERROR(o.submit(
        copy, TaskArgs().input(h.outputs[0]).output_existing(i32(c)).set_dependencies({2})));  // t5
    return o.submit(nop, TaskArgs().input(a_tail), {.block_num = 2});                          // t6
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const Json doc = read_json(kDepsFile);
  EXPECT_EQ(doc.at("schema_version"), 1);

  // tasks
  const Json& tasks = doc.at("tasks");
  ASSERT_EQ(tasks.size(), 7u);
  const std::vector<std::string> callables = {"fill", "fill", "copy", "add", "fill", "copy", "nop"};
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Json& t = tasks[i];
    SCOPED_TRACE(t.dump());
    EXPECT_EQ(t.size(), 9u);
    EXPECT_EQ(t.at("num_flags"), 64);
    EXPECT_EQ(t.at("id"), std::to_string(i));
    EXPECT_EQ(t.at("callable"), callables[i]);
    EXPECT_TRUE(is_id(t.at("scope")));
    EXPECT_EQ(t.at("scope_depth"), i >= 5 ? 1 : 0);
    EXPECT_EQ(t.at("block_num"), i == 6 ? 2 : 1);
    EXPECT_EQ(t.at("mode"), "vector");
    for (const Json& arg : t.at("args")) {
      EXPECT_TRUE(is_id(arg.at("tensor")));
      EXPECT_TRUE(arg.at("tag").is_string());
    }
  }
  EXPECT_EQ(tasks[0].at("scalars"), Json::parse(R"([{"bits": "0x5", "dtype": "int32"}])"));
  EXPECT_EQ(tasks[6].at("scalars"), Json::array());
  EXPECT_EQ(tasks[0].at("scope"), "0");
  EXPECT_EQ(tasks[5].at("scope"), "1");
  EXPECT_EQ(tasks[1].at("args"), Json::parse(R"([{"tensor": "1", "tag": "OUTPUT"}])"));
  // t3 and t5 pass the view t1 made: the same tensor.
  EXPECT_EQ(tasks[3].at("args")[0].at("tensor"), "1");
  EXPECT_EQ(tasks[5].at("args")[0].at("tensor"), "1");
  EXPECT_EQ(tasks[4].at("args")[0].at("tensor"), "0");  // a again

  // tensors: a, h, b, c, a's tail
  const Json& tensors = doc.at("tensors");
  ASSERT_EQ(tensors.size(), 5u);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Json& t = tensors[i];
    SCOPED_TRACE(t.dump());
    EXPECT_EQ(t.size(), 6u);
    EXPECT_EQ(t.at("id"), std::to_string(i));
    EXPECT_TRUE(is_address(t.at("buffer")));
    EXPECT_EQ(t.at("dtype"), "int32");
    EXPECT_TRUE(t.at("shape").is_array());
    EXPECT_EQ(t.at("strides").size(), t.at("shape").size());
    EXPECT_TRUE(t.at("span_bytes").is_number_unsigned());
  }
  const auto address = [](const void* p) {
    return fmt::format("{:#x}", reinterpret_cast<std::uintptr_t>(p));
  };
  EXPECT_EQ(tensors[0].at("buffer"), address(a.data()));
  EXPECT_EQ(tensors[4].at("buffer"), address(a.data() + 2));
  EXPECT_EQ(tensors[4].at("shape"), Json::array({2}));
  EXPECT_EQ(tensors[4].at("span_bytes"), 8);

  // edges
  using Edge = std::tuple<std::string, std::string, int, std::string, std::string>;
  std::set<Edge> edges;
  for (const Json& e : doc.at("edges")) {
    SCOPED_TRACE(e.dump());
    EXPECT_EQ(e.size(), 7u);
    EXPECT_EQ(e.at("retired"), false);  // nothing retired before its successors came
    EXPECT_TRUE(is_id(e.at("pred")));
    EXPECT_TRUE(is_id(e.at("succ")));
    edges.insert({e.at("pred").get<std::string>(), e.at("succ").get<std::string>(),
                  e.at("arg").get<int>(), e.at("source").get<std::string>(),
                  e.at("kind").get<std::string>()});
    const Json& overlap = e.at("overlap");
    if (e.at("source") == "explicit") {
      EXPECT_TRUE(overlap.is_null());
      EXPECT_EQ(e.at("arg"), -1);
      continue;
    }
    ASSERT_TRUE(overlap.is_object());
    EXPECT_EQ(overlap.size(), 4u);
    EXPECT_TRUE(overlap.at("pred_arg").is_number_unsigned());
    EXPECT_TRUE(is_address(overlap.at("lo")));
    EXPECT_TRUE(is_address(overlap.at("hi")));
    EXPECT_EQ(overlap.at("exact"), true);
    if (e.at("succ") == "6") {  // a partial overlap: a's last two elements
      EXPECT_EQ(overlap.at("pred_arg"), 0);
      EXPECT_EQ(overlap.at("lo"), address(a.data() + 2));
      EXPECT_EQ(overlap.at("hi"), address(a.data() + 4));
    }
    if (e.at("succ") == "4" && e.at("kind") == "WAR") {
      EXPECT_EQ(overlap.at("pred_arg"), 0);  // t2 reads a as its argument 0
    }
  }
  EXPECT_EQ(edges, (std::set<Edge>{
                       {"0", "2", 0, "tensormap", "RAW"},
                       {"1", "3", 0, "creator", "RAW"},
                       {"0", "4", 0, "tensormap", "WAW"},
                       {"2", "4", 0, "tensormap", "WAR"},
                       {"1", "5", 0, "creator", "RAW"},
                       {"3", "5", 0, "tensormap", "RAW"},
                       {"2", "5", -1, "explicit", "ORDER"},
                       {"4", "6", 0, "tensormap", "RAW"},
                   }));

  // scopes
  const Json& scopes = doc.at("scopes");
  ASSERT_EQ(scopes.size(), 2u);
  EXPECT_EQ(scopes[0], Json::parse(R"({"id": "0", "parent": null, "depth": 0, "site": "<root>"})"));
  EXPECT_EQ(scopes[1].at("id"), "1");
  EXPECT_EQ(scopes[1].at("parent"), "0");
  EXPECT_EQ(scopes[1].at("depth"), 1);
  EXPECT_THAT(scopes[1].at("site").get<std::string>(),
              ::testing::EndsWith(fmt::format("test_dep_gen.cpp:{}", inner_line)));
}

TEST_F(RuntimeDepGen, EdgesToTasksThatRetiredBeforeTheirSuccessorCameAreKeptAsRetired) {
  // t0 writes a in a scope that ends; the orchestration waits until t0 completed. t1 reads a:
  // the runtime still finds t0 (edge 0 -> 1), then retires t0 (the sample after t1's submit
  // reclaims it). t2 writes a: the runtime finds only t1 (WAR), but the graph also keeps
  // t0 -> t2 (WAW), which a replay must keep, marked retired.
  struct Completion : Observer {
    std::atomic<bool> first{false};
    void on_task_complete(const TaskInfo& t, const Status&) override {
      if (t.id == 0) first = true;
    }
  } completion;
  config.observers.push_back(&completion);
  config.diagnostics.dep_gen = true;
  std::vector<std::int32_t> a(4, 0), b(4, 0);
  const Status s = run([&](Orchestrator& o) -> Status {
    {
      auto scope = o.scope();
      HP_RETURN_IF_ERROR(o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(3)));  // t0
    }
    while (!completion.first.load()) std::this_thread::yield();
    HP_RETURN_IF_ERROR(o.submit(copy, TaskArgs().input(i32(a)).output_existing(i32(b))));  // t1
    return o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(1));                   // t2
  });
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::set<std::tuple<std::string, std::string, std::string, bool>> edges;
  const Json doc = read_json(kDepsFile);
  for (const Json& e : doc.at("edges")) {
    edges.insert({e.at("pred").get<std::string>(), e.at("succ").get<std::string>(),
                  e.at("kind").get<std::string>(), e.at("retired").get<bool>()});
  }
  EXPECT_EQ(edges,
            (std::set<std::tuple<std::string, std::string, std::string, bool>>{
                {"0", "1", "RAW", false}, {"1", "2", "WAR", false}, {"0", "2", "WAW", true}}))
      << doc.at("edges").dump();
}

}  // namespace
}  // namespace hp::runtime::testing
