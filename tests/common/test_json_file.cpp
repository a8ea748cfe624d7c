// Tests of read_json_file / write_json_file (native/common/json_file.h).
#include "common/json_file.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "printers.h"

namespace hp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Each test gets a fresh directory of its own, removed afterwards.
class JsonFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "hp_json_file_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "mkdtemp " << pattern;
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  void write_text(const std::string& name, const std::string& text) const {
    std::ofstream out(path(name), std::ios::binary);
    out << text;
    ASSERT_TRUE(out.good());
  }

  std::string read_text(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  fs::path dir_;
};

TEST_F(JsonFile, WriteThenReadRoundTrips) {
  const Json value = {{"name", "hyper_parallel"},
                      {"version", 3},
                      {"ratio", 0.25},
                      {"enabled", true},
                      {"nothing", nullptr},
                      {"cpus", {0, 1, 2, 3}},
                      {"nested", {{"unicode", "\xc3\xa9t\xc3\xa9"}, {"empty", Json::object()}}}};
  ASSERT_TRUE(write_json_file(path("a.json"), value).is_ok());
  Json read;
  const Status status = read_json_file(path("a.json"), &read);
  ASSERT_TRUE(status.is_ok()) << status.to_string();
  EXPECT_EQ(read, value);
}

TEST_F(JsonFile, WriteUsesTheIndent) {
  const Json value = {{"k", 1}};
  ASSERT_TRUE(write_json_file(path("compact.json"), value, -1).is_ok());
  ASSERT_TRUE(write_json_file(path("pretty.json"), value, 4).is_ok());
  EXPECT_EQ(read_text("compact.json"), "{\"k\":1}\n");
  EXPECT_EQ(read_text("pretty.json"), "{\n    \"k\": 1\n}\n");
}

TEST_F(JsonFile, WriteReplacesAnExistingFile) {
  ASSERT_TRUE(write_json_file(path("a.json"), Json{{"v", 1}}).is_ok());
  ASSERT_TRUE(write_json_file(path("a.json"), Json{{"v", 2}}).is_ok());
  Json read;
  ASSERT_TRUE(read_json_file(path("a.json"), &read).is_ok());
  EXPECT_EQ(read, (Json{{"v", 2}}));
}

TEST_F(JsonFile, WriteLeavesNoTemporaryFiles) {
  ASSERT_TRUE(write_json_file(path("a.json"), Json::array({1, 2})).is_ok());
  ASSERT_TRUE(write_json_file(path("a.json"), Json::array({3})).is_ok());
  ASSERT_TRUE(write_json_file(path("b.json"), Json("text")).is_ok());
  EXPECT_THAT(entries(), ::testing::UnorderedElementsAre("a.json", "b.json"));
}

TEST_F(JsonFile, MissingFileIsNotFound) {
  Json read = 5;
  const Status status = read_json_file(path("missing.json"), &read);
  EXPECT_EQ(status.code(), ErrorCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(path("missing.json")));
  EXPECT_EQ(read, Json(5)) << "output changed on error";
}

TEST_F(JsonFile, CorruptFileIsCorruptData) {
  write_text("bad.json", "{not json");
  Json read = 5;
  const Status status = read_json_file(path("bad.json"), &read);
  EXPECT_EQ(status.code(), ErrorCode::kCorruptData);
  EXPECT_THAT(status.message(), HasSubstr(path("bad.json")));
  EXPECT_EQ(read, Json(5)) << "output changed on error";
}

TEST_F(JsonFile, EmptyFileIsCorruptData) {
  write_text("empty.json", "");
  Json read;
  const Status status = read_json_file(path("empty.json"), &read);
  EXPECT_EQ(status.code(), ErrorCode::kCorruptData);
  EXPECT_THAT(status.message(), HasSubstr(path("empty.json")));
}

TEST_F(JsonFile, TrailingGarbageIsCorruptData) {
  write_text("trailing.json", "{\"a\": 1} extra");
  Json read;
  EXPECT_EQ(read_json_file(path("trailing.json"), &read).code(), ErrorCode::kCorruptData);
}

// A number the parser cannot hold (nlohmann-json throws out_of_range, not parse_error): still
// a file that does not parse, never an exception out of the reader.
TEST_F(JsonFile, ANumberOutOfRangeIsCorruptData) {
  write_text("huge.json", "{\"a\": [1, 3787e5220]}");
  Json read = 5;
  const Status status = read_json_file(path("huge.json"), &read);
  EXPECT_EQ(status.code(), ErrorCode::kCorruptData) << status.to_string();
  EXPECT_THAT(status.message(), HasSubstr(path("huge.json")));
  EXPECT_EQ(read, Json(5)) << "output changed on error";
}

// json_integer: a JSON integer in T's range, else std::invalid_argument; a float (even an
// integral-looking 1e30) never goes through a cast.
TEST(JsonInteger, TakesIntegersInRangeOnly) {
  EXPECT_EQ(json_integer<int>(Json::parse("-7")), -7);
  EXPECT_EQ(json_integer<std::uint64_t>(Json::parse("18446744073709551615")), UINT64_MAX);
  EXPECT_EQ(json_integers<std::int64_t>(Json::parse("[1, -2, 3]")),
            (std::vector<std::int64_t>{1, -2, 3}));
  for (const char* bad : {"1e30", "2.5", "\"3\"", "null", "4294967296", "-1"}) {
    EXPECT_THROW(json_integer<std::uint32_t>(Json::parse(bad)), std::invalid_argument) << bad;
  }
  EXPECT_THROW(json_integers<std::int64_t>(Json::parse("[1, 1.88889e+90]")), std::invalid_argument);
  EXPECT_THROW(json_integers<std::int64_t>(Json::parse("{}")), std::invalid_argument);
}

TEST_F(JsonFile, ReadingADirectoryIsIoError) {
  // The header promises IO_ERROR for a file that cannot be read; CORRUPT_DATA would claim
  // that content was read and failed to parse.
  fs::create_directory(path("sub"));
  Json read;
  const Status status = read_json_file(path("sub"), &read);
  EXPECT_EQ(status.code(), ErrorCode::kIoError) << status.to_string();
  EXPECT_THAT(status.message(), HasSubstr(path("sub")));
}

TEST_F(JsonFile, WriteIntoMissingDirectoryIsIoError) {
  const std::string target = path("no/such/dir/a.json");
  const Status status = write_json_file(target, Json{{"a", 1}});
  EXPECT_EQ(status.code(), ErrorCode::kIoError);
  EXPECT_THAT(status.message(), HasSubstr(path("no/such/dir")));
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(entries().empty());
}

TEST_F(JsonFile, WriteOverADirectoryIsIoErrorAndCleansUp) {
  // rename() onto a non-empty directory fails: the temporary file must not be left behind.
  fs::create_directories(path("taken/inside"));
  const Status status = write_json_file(path("taken"), Json{{"a", 1}});
  EXPECT_EQ(status.code(), ErrorCode::kIoError);
  EXPECT_THAT(entries(), ::testing::ElementsAre("taken"));
}

TEST_F(JsonFile, UnserializableValueIsAnErrorNotAnException) {
  // A string that is not UTF-8 cannot be dumped as JSON: the call must report that as a
  // Status (not throw through the Status API) and leave no temporary file behind.
  const Json value = {{"bad", std::string("\xff\xfe", 2)}};
  Status status;
  EXPECT_NO_THROW(status = write_json_file(path("a.json"), value));
  EXPECT_FALSE(status.is_ok());
  EXPECT_TRUE(entries().empty()) << "left: " << ::testing::PrintToString(entries());
}

}  // namespace
}  // namespace hp
