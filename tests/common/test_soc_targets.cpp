// Tests of the SoC target table's C++ view (native/common/soc_targets.h). That the other readers
// of native/common/soc_targets.tsv agree with it is tests/build/test_soc_targets.py.
#include "common/soc_targets.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace hp {
namespace {

TEST(SocTargets, EveryRequiredFeatureIsOneCpuFeaturesKnows) {
  std::set<std::string_view> known;
  for (const CpuFeatureField& f : cpu_feature_fields()) known.insert(f.name);
  ASSERT_FALSE(soc_targets().empty());
  for (const SocTarget& t : soc_targets()) {
    EXPECT_FALSE(t.requires_features.empty()) << t.name;
    for (std::string_view f : t.requires_features)
      EXPECT_TRUE(known.count(f)) << t.name << " needs " << f;
  }
}

TEST(SocTargets, NarrowestFirstEachNeedsWhatTheOneBeforeNeeds) {
  const auto targets = soc_targets();
  for (std::size_t i = 1; i < targets.size(); ++i) {
    const std::set<std::string_view> wider(targets[i].requires_features.begin(),
                                           targets[i].requires_features.end());
    for (std::string_view f : targets[i - 1].requires_features) {
      EXPECT_TRUE(wider.count(f)) << targets[i].name << " lacks " << f << " that "
                                  << targets[i - 1].name << " needs";
    }
  }
}

TEST(SocTargets, FindAndMissingFeatures) {
  const SocTarget& first = soc_targets().front();
  EXPECT_EQ(find_soc_target(first.name), &first);
  EXPECT_EQ(find_soc_target("no_such_target"), nullptr);
  EXPECT_EQ(find_soc_target("reference"), nullptr);  // built into the kernels' front end

  CpuFeatures none;
  std::string all;
  for (std::string_view f : first.requires_features)
    all += (all.empty() ? "" : ",") + std::string(f);
  EXPECT_EQ(missing_cpu_features(first, none), all);

  CpuFeatures every;
  for (const CpuFeatureField& f : cpu_feature_fields()) every.*f.member = true;
  for (const SocTarget& t : soc_targets()) EXPECT_EQ(missing_cpu_features(t, every), "") << t.name;
}

}  // namespace
}  // namespace hp
