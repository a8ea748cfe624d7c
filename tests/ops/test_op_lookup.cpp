// hp::ops::find over the payload's own op package: its ops resolve to the symbols the package
// library exports (the ones its ops.json names); an op the package does not hold, or no op at
// all, is NOT_FOUND naming the package searched. (Other search paths, HP_VENDOR_PATH and broken
// packages: tests/python/test_ops.py, one process each, since the path is read once.)
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "hyper_parallel_op_api.h"
#include "ops/op_lookup.h"

namespace hp::ops {
namespace {

TEST(OpLookup, FindsThePayloadsOps) {
  const auto pkgs = packages();
  ASSERT_FALSE(pkgs.empty());
  EXPECT_EQ(pkgs[0].origin, "payload");
  ASSERT_TRUE(pkgs[0].status.is_ok()) << pkgs[0].status.to_string();
  EXPECT_EQ(search_path()[0], pkgs[0].dir);
  OpEntry e;
  const Status s = find("dispatch_layout", &e);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(e.size, sizeof(OpEntry));
  EXPECT_EQ(e.package, pkgs[0].dir);
  EXPECT_TRUE(e.family.empty());
  // The entry points are the package library's, the ones this test links.
  EXPECT_EQ(e.workspace_fn<decltype(&hpDispatchLayoutGetWorkspaceSize)>(),
            &hpDispatchLayoutGetWorkspaceSize);
  EXPECT_EQ(e.execute_fn<decltype(&hpDispatchLayout)>(), &hpDispatchLayout);
  void* create = nullptr;
  ASSERT_TRUE(find_symbol(e, "hpMoeBufferCreate", &create).is_ok());
  EXPECT_EQ(create, reinterpret_cast<void*>(&hpMoeBufferCreate));
  EXPECT_EQ(find_symbol(e, "hpNoSuchSymbol", &create).code(), ErrorCode::kNotFound);
  OpEntry layer;
  ASSERT_TRUE(find("fused_deep_moe", &layer).is_ok());
  EXPECT_EQ(layer.family, "fused_deep_moe");
  EXPECT_EQ(layer.variant, "base");
  EXPECT_FALSE(layer.socs.empty());
}

TEST(OpLookup, AnOpNoPackageHoldsIsNotFound) {
  OpEntry e;
  const Status s = find("no_such_op", &e);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("no_such_op"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(packages()[0].dir), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("HP_VENDOR_PATH"), std::string::npos) << s.message();
  // The payload's package holds the base variant only: the others are not found.
  EXPECT_EQ(find("fused_deep_moe_w4a8", &e).code(), ErrorCode::kNotFound);
  EXPECT_EQ(find("fused_deep_moe", nullptr).code(), ErrorCode::kInvalidArgument);
}

// read_package: one directory's ops.json. The library it names must lie inside the package:
// a relative path that climbs out of it ("../x.so") or names the directory itself is refused.
TEST(OpLookup, ReadPackageRefusesALibraryOutsideThePackage) {
  const auto own = packages()[0];
  OpPackage read;
  ASSERT_TRUE(read_package(own.dir, &read).is_ok()) << read.status.to_string();
  EXPECT_EQ(read.library, own.library);
  EXPECT_EQ(read.ops, own.ops);

  std::string dir = (std::filesystem::temp_directory_path() / "hp_ops_json_XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  for (const char* library : {"../lib/libx.so", "lib/../../libx.so", ".", "lib/.."}) {
    std::ofstream(dir + "/ops.json")
        << R"({"format": 1, "library": ")" << library
        << R"(", "library_sha256": "", "registry_sha256": "", "version": "0", "targets": [],
              "ops": []})";
    const Status s = read_package(dir, &read);
    EXPECT_EQ(s.code(), ErrorCode::kCorruptData) << library << ": " << s.to_string();
    EXPECT_NE(s.message().find("inside the package"), std::string::npos) << s.message();
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(read_package(dir, &read).code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace hp::ops
