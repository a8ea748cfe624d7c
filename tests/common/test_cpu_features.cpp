// Tests of hp::cpu_features() (native/common/cpu_features.h) against the kernel's view of the
// CPU (/proc/cpuinfo flags) and of the feature list's own consistency.
#include "common/cpu_features.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace hp {
namespace {

std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(CpuFeatures, PrefetchwMatchesTheKernelsFlag) {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
  // Linux names CPUID 0x80000001 ECX bit 8 (PREFETCHW) "3dnowprefetch".
  EXPECT_EQ(cpu_features().prfchw, flags.count("3dnowprefetch") == 1);
}

TEST(CpuFeatures, AvxFamilyMatchesTheKernelsFlags) {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
  // The kernel clears these flags when it does not save their registers, as cpu_features()
  // requires.
  EXPECT_EQ(cpu_features().avx2, flags.count("avx2") == 1);
  EXPECT_EQ(cpu_features().avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(cpu_features().avx512_bf16, flags.count("avx512_bf16") == 1);
}

TEST(CpuFeatures, EveryFieldIsNamedOnceAndListedWhenPresent) {
  std::set<std::string> names;
  const CpuFeatures& f = cpu_features();
  const std::string listed = "," + f.to_string() + ",";
  for (const CpuFeatureField& field : cpu_feature_fields()) {
    EXPECT_TRUE(names.insert(std::string(field.name)).second) << field.name;
    EXPECT_EQ(listed.find("," + std::string(field.name) + ",") != std::string::npos,
              f.*field.member)
        << field.name;
  }
  EXPECT_TRUE(names.count("prfchw"));
}

}  // namespace
}  // namespace hp
