// Argument dumps (DiagnosticsConfig::dump_args): level 1 captures exactly the arguments marked
// with TaskArgs::dump(), level 2 every tensor and scalar; tensor_dump.json follows its schema
// (tensor_dump_observer.h) and the .bin holds the values before and after each task; the
// reader, the printer and the installed hp-dump tool print them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "diagnostics_fixture.h"
#include "runtime/tensor_dump_printer.h"
#include "runtime/tensor_dump_reader.h"

namespace hp::runtime::testing {
namespace {

using ::testing::HasSubstr;

class RuntimeTensorDump : public DiagnosticsTest {
 protected:
  // t0 fill a := 5 (task-level dump()); t1 add a += 2 (unmarked); t2 copy b := a (dump({1}):
  // b only); t3 copy a strided column of m into a runtime OUTPUT (dump({0, 1})).
  Status run_program() {
    std::iota(a.begin(), a.end(), 0);
    std::iota(m.begin(), m.end(), 0);
    const std::vector<std::int64_t> shape = {4}, strides = {4};
    const TensorView column(m.data() + 1, DType::kInt32, shape, strides);  // 1, 5, 9, 13
    return run([&](Orchestrator& o) -> Status {
      HP_RETURN_IF_ERROR(o.submit(
          fill, TaskArgs().output_existing(i32(a)).scalar(5).scalar(std::uint64_t{0xABCD}).dump()));
      HP_RETURN_IF_ERROR(o.submit(add_scalar, TaskArgs().inout(i32(a)).scalar(2).scalar(1.5f)));
      HP_RETURN_IF_ERROR(
          o.submit(copy, TaskArgs().input(i32(a)).output_existing(i32(b)).dump({1})));
      return o.submit(copy, TaskArgs().input(column).output(DType::kInt32, {4}).dump({0, 1}));
    });
  }

  // Checks every field of tensor_dump.json (tensor_dump_observer.h); returns the entries keyed
  // by (task, kind, arg).
  std::map<std::tuple<std::string, std::string, int>, Json> checked_entries(int level) {
    const Json doc = read_json(kTensorDumpJsonFile);
    EXPECT_EQ(doc.at("schema_version"), 1);
    EXPECT_EQ(doc.at("level"), level);
    EXPECT_EQ(doc.at("bin_file"), std::string(kTensorDumpBinFile));
    const std::uint64_t bin_size = read_bytes(kTensorDumpBinFile).size();
    std::map<std::tuple<std::string, std::string, int>, Json> out;
    for (const Json& e : doc.at("entries")) {
      SCOPED_TRACE(e.dump());
      EXPECT_EQ(e.size(), 12u);
      const std::string task = e.at("task").get<std::string>();
      EXPECT_FALSE(task.empty());
      EXPECT_EQ(task.find_first_not_of("0123456789"), std::string::npos);
      EXPECT_TRUE(e.at("callable").is_string());
      const std::string kind = e.at("kind").get<std::string>();
      EXPECT_TRUE(kind == "tensor" || kind == "scalar");
      const bool scalar = kind == "scalar";
      EXPECT_GE(e.at("arg").get<int>(), 0);
      if (scalar) {
        EXPECT_TRUE(e.at("tag").is_null());
        EXPECT_TRUE(e.at("address").is_null());
        EXPECT_EQ(e.at("shape"), Json::array());
        EXPECT_EQ(e.at("strides"), Json::array());
      } else {
        EXPECT_THAT(
            (std::set<std::string>{"INPUT", "OUTPUT", "INOUT", "OUTPUT_EXISTING", "NO_DEP"}),
            ::testing::Contains(e.at("tag").get<std::string>()));
        EXPECT_EQ(e.at("address").get<std::string>().rfind("0x", 0), 0u);
        EXPECT_EQ(e.at("shape").size(), e.at("strides").size());
        for (const Json& d : e.at("shape")) EXPECT_TRUE(d.is_number_integer());
        for (const Json& d : e.at("strides")) EXPECT_TRUE(d.is_number_integer());
      }
      EXPECT_THAT((std::set<std::string>{"int8", "uint8", "int32", "int64", "bf16", "fp16", "fp32",
                                         "fp64", "bits64"}),
                  ::testing::Contains(e.at("dtype").get<std::string>()));
      for (const char* phase : {"before", "after"}) {
        const Json& r = e.at(phase);
        EXPECT_TRUE(r.is_object()) << phase;  // every task here completes
        if (!r.is_object()) continue;
        EXPECT_LE(r.at("offset").get<std::uint64_t>() + r.at("bytes").get<std::uint64_t>(),
                  bin_size);
      }
      EXPECT_EQ(e.at("status"), "OK");
      out[{task, kind, e.at("arg").get<int>()}] = e;
    }
    return out;
  }

  std::vector<std::int32_t> ints(const Json& range) {
    const std::vector<std::byte> bin = read_bytes(kTensorDumpBinFile);
    const auto offset = range.at("offset").get<std::size_t>();
    const auto bytes = range.at("bytes").get<std::size_t>();
    std::vector<std::int32_t> v(bytes / sizeof(std::int32_t));
    if (offset + bytes <= bin.size()) std::memcpy(v.data(), bin.data() + offset, bytes);
    return v;
  }

  std::vector<std::int32_t> a = std::vector<std::int32_t>(8), b = std::vector<std::int32_t>(8, -1);
  std::vector<std::int32_t> m = std::vector<std::int32_t>(16);
};

using Key = std::tuple<std::string, std::string, int>;

std::set<Key> keys(const std::map<Key, Json>& entries) {
  std::set<Key> out;
  for (const auto& [k, v] : entries) out.insert(k);
  return out;
}

TEST_F(RuntimeTensorDump, LevelOneCapturesExactlyTheMarkedArgumentsBeforeAndAfter) {
  config.diagnostics.dump_args = 1;
  const Status s = run_program();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const auto entries = checked_entries(1);
  EXPECT_EQ(keys(entries),
            (std::set<Key>{
                {"0", "tensor", 0}, {"2", "tensor", 1}, {"3", "tensor", 0}, {"3", "tensor", 1}}));
  const Json& filled = entries.at({"0", "tensor", 0});
  EXPECT_EQ(filled.at("callable"), "fill");
  EXPECT_EQ(filled.at("tag"), "OUTPUT_EXISTING");
  EXPECT_EQ(filled.at("dtype"), "int32");
  EXPECT_EQ(filled.at("shape"), Json::array({8}));
  EXPECT_EQ(ints(filled.at("before")), (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(ints(filled.at("after")), std::vector<std::int32_t>(8, 5));
  const Json& copied = entries.at({"2", "tensor", 1});
  EXPECT_EQ(ints(copied.at("before")), std::vector<std::int32_t>(8, -1));
  EXPECT_EQ(ints(copied.at("after")), std::vector<std::int32_t>(8, 7));
  // A strided view is packed row-major; its strides are recorded as the view had them.
  const Json& column = entries.at({"3", "tensor", 0});
  EXPECT_EQ(column.at("strides"), Json::array({4}));
  EXPECT_EQ(ints(column.at("before")), (std::vector<std::int32_t>{1, 5, 9, 13}));
  EXPECT_EQ(ints(column.at("after")), (std::vector<std::int32_t>{1, 5, 9, 13}));
  const Json& output = entries.at({"3", "tensor", 1});
  EXPECT_EQ(output.at("tag"), "OUTPUT");
  EXPECT_EQ(ints(output.at("after")), (std::vector<std::int32_t>{1, 5, 9, 13}));
}

TEST_F(RuntimeTensorDump, LevelTwoCapturesEveryTensorAndScalar) {
  config.diagnostics.dump_args = 2;
  const Status s = run_program();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const auto entries = checked_entries(2);
  EXPECT_EQ(keys(entries), (std::set<Key>{{"0", "tensor", 0},
                                          {"0", "scalar", 0},
                                          {"0", "scalar", 1},
                                          {"1", "tensor", 0},
                                          {"1", "scalar", 0},
                                          {"1", "scalar", 1},
                                          {"2", "tensor", 0},
                                          {"2", "tensor", 1},
                                          {"3", "tensor", 0},
                                          {"3", "tensor", 1}}));
  EXPECT_EQ(ints(entries.at({"1", "tensor", 0}).at("before")), std::vector<std::int32_t>(8, 5));
  EXPECT_EQ(ints(entries.at({"1", "tensor", 0}).at("after")), std::vector<std::int32_t>(8, 7));
  const Json& five = entries.at({"0", "scalar", 0});
  EXPECT_EQ(five.at("dtype"), "int32");
  EXPECT_EQ(ints(five.at("before")), std::vector<std::int32_t>{5});
  EXPECT_EQ(ints(five.at("after")), std::vector<std::int32_t>{5});
  const Json& opaque = entries.at({"0", "scalar", 1});
  EXPECT_EQ(opaque.at("dtype"), "bits64");
  EXPECT_EQ(opaque.at("before").at("bytes"), 8);
  EXPECT_EQ(ints(opaque.at("before")), (std::vector<std::int32_t>{0xABCD, 0}));
  const Json& half = entries.at({"1", "scalar", 1});
  EXPECT_EQ(half.at("dtype"), "fp32");
  float value = 0;
  const std::int32_t bits = ints(half.at("before")).at(0);
  std::memcpy(&value, &bits, sizeof(value));
  EXPECT_EQ(value, 1.5f);
}

TEST_F(RuntimeTensorDump, LevelZeroIgnoresTheMarkersAndWritesNothing) {
  const Status s = run_program();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_FALSE(std::filesystem::exists(config.diagnostics.output_prefix));
}

TEST_F(RuntimeTensorDump, AMarkerOnAMissingArgumentIsRefused) {
  config.diagnostics.dump_args = 1;
  const Status s = run([&](Orchestrator& o) -> Status {
    return o.submit(fill, TaskArgs().output_existing(i32(a)).scalar(1).dump({3}));
  });
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dump(3)"));
}

TEST_F(RuntimeTensorDump, TheReaderAndPrinterShowTheCapturedValues) {
  config.diagnostics.dump_args = 2;
  ASSERT_TRUE(run_program().is_ok());
  TensorDump dump;
  const Status opened = TensorDump::open(config.diagnostics.output_prefix, &dump);
  ASSERT_TRUE(opened.is_ok()) << opened.to_string();
  EXPECT_EQ(dump.level(), 2);
  EXPECT_EQ(dump.entries().size(), 10u);
  const TensorDumpEntry* entry = nullptr;
  ASSERT_TRUE(dump.find(0, DumpArgKind::kTensor, 0, &entry).is_ok());
  std::vector<std::byte> bytes;
  ASSERT_TRUE(dump.read(*entry, DumpPhase::kAfter, &bytes).is_ok());
  EXPECT_EQ(format_dump_header(*entry, DumpPhase::kAfter),
            "task 0 (callable 'fill') tensor arg 0 OUTPUT_EXISTING after: int32[8] status OK");
  EXPECT_EQ(format_dump_values(*entry, bytes), "[:] 5 5 5 5 5 5 5 5\n");
  ASSERT_TRUE(dump.read(*entry, DumpPhase::kBefore, &bytes).is_ok());
  EXPECT_EQ(format_dump_values(*entry, bytes, {.max_elements = 3}),
            "[:] 0 1 2\n... (5 more elements)\n");
  ASSERT_TRUE(dump.find(1, DumpArgKind::kScalar, 1, &entry).is_ok());
  ASSERT_TRUE(dump.read(*entry, DumpPhase::kBefore, &bytes).is_ok());
  EXPECT_EQ(format_dump_values(*entry, bytes), "= 1.5\n");
  ASSERT_TRUE(dump.find(0, DumpArgKind::kScalar, 1, &entry).is_ok());
  ASSERT_TRUE(dump.read(*entry, DumpPhase::kBefore, &bytes).is_ok());
  EXPECT_EQ(format_dump_values(*entry, bytes), "= 0x000000000000abcd\n");

  const Status missing = dump.find(2, DumpArgKind::kTensor, 5, &entry);
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("tensor 0, tensor 1"));
  EXPECT_THAT(format_dump_listing(dump),
              HasSubstr("task 3 copy tensor 1 OUTPUT int32[4] before after"));
}

TEST_F(RuntimeTensorDump, ThePrinterLaysOutRowsOfTheLastDimension) {
  TensorDumpEntry entry;
  entry.task = 9;
  entry.callable = "k";
  entry.dtype = DType::kInt32;
  entry.shape = {2, 3};
  const std::vector<std::int32_t> values = {1, 2, 3, 4, 5, 6};
  const auto bytes = std::as_bytes(std::span<const std::int32_t>(values));
  EXPECT_EQ(format_dump_values(entry, bytes), "[0, :] 1 2 3\n[1, :] 4 5 6\n");
  EXPECT_EQ(format_dump_values(entry, bytes, {.max_elements = 4}),
            "[0, :] 1 2 3\n[1, :] 4\n... (2 more elements)\n");
}

TEST_F(RuntimeTensorDump, AMissingDumpIsNotFound) {
  TensorDump dump;
  EXPECT_EQ(TensorDump::open(dir, &dump).code(), ErrorCode::kNotFound);
}

// Runs the hp-dump of the payload these tests belong to (tests/core/bin -> payload/.../bin).
std::string run_installed_hp_dump(const std::string& args, int* exit_code) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path tool =
      self.parent_path() / "../../../payload/hyper_parallel/core/bin/hp-dump";
  EXPECT_TRUE(std::filesystem::exists(tool)) << tool;
  std::FILE* pipe = ::popen(("'" + tool.string() + "' " + args + " 2>&1").c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return "";
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    output.append(buffer, n);
  const int status = ::pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

TEST_F(RuntimeTensorDump, TheInstalledViewerPrintsAChosenTensor) {
  config.diagnostics.dump_args = 1;
  ASSERT_TRUE(run_program().is_ok());
  const std::string prefix = "'" + config.diagnostics.output_prefix + "'";
  int code = -1;
  std::string output = run_installed_hp_dump(prefix + " --task 2 --arg 1 --after", &code);
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output,
            "task 2 (callable 'copy') tensor arg 1 OUTPUT_EXISTING after: int32[8] status OK\n"
            "[:] 7 7 7 7 7 7 7 7\n");
  output = run_installed_hp_dump(prefix + " --task 2 --arg 1", &code);
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("[:] -1 -1 -1 -1 -1 -1 -1 -1\n"));
  output = run_installed_hp_dump(prefix + " --task 1 --arg 0", &code);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(output, HasSubstr("TaskArgs::dump()"));
}

}  // namespace
}  // namespace hp::runtime::testing
