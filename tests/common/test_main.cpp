// The main of the GoogleTest executables that hold the tests of several sources (hp_add_test:
// one executable per test directory, libraries and optimisation level, so that their sources
// share translation units). GoogleTest's main, plus
//
//   --hp_sources=<file>[,<file>...]   run only the tests defined in these source files (base
//                                     names), which is one ctest test
//
// An explicit --gtest_filter wins over --hp_sources (a user's choice, and the filter GoogleTest
// gives the child of a death test). Sources that define no test are an error: a ctest test that
// runs nothing cannot pass.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

// A namespace of its own: this file shares unity translation units with test sources.
namespace hp_test_main {

constexpr std::string_view kSourcesFlag = "--hp_sources=";

std::set<std::string> split(std::string_view list) {
  std::set<std::string> out;
  std::stringstream in{std::string(list)};
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.insert(item);
  }
  return out;
}

std::string base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// The positive filter naming every test defined in one of `sources`; empty when none is.
std::string filter_of(const std::set<std::string>& sources) {
  std::string filter;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(t);
      if (sources.count(base_name(info.file())) == 0) continue;
      if (!filter.empty()) filter += ':';
      filter += std::string(info.test_suite_name()) + "." + info.name();
    }
  }
  return filter;
}

}  // namespace hp_test_main

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::set<std::string> sources;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(hp_test_main::kSourcesFlag)) {
      sources = hp_test_main::split(arg.substr(hp_test_main::kSourcesFlag.size()));
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s' (--hp_sources=<file>,... or --gtest_*)\n",
                   argv[0], argv[i]);
      return 2;
    }
  }
  if (!sources.empty() && GTEST_FLAG_GET(filter) == "*") {
    const std::string filter = hp_test_main::filter_of(sources);
    if (filter.empty()) {
      std::fprintf(stderr, "%s: --hp_sources names no source that defines a test here\n", argv[0]);
      return 2;
    }
    GTEST_FLAG_SET(filter, filter);
  }
  return RUN_ALL_TESTS();
}
