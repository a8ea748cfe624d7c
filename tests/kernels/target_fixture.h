// Loading the kernel targets under test, and random test data.
//
// Every test parameterized over targets runs once per SoC target plus two test-only libraries:
// the AMX tile algorithm on its software tile model (x86_64_amx_emulated), and x86_64_v4 with
// its bf16 GEMMs on FMAs (x86_64_v4_fma: v4 itself uses vdpbf16ps on CPUs with
// AVX512_BF16); a target this CPU
// cannot run is skipped with the reason, a target this payload lacks is a failure (the
// TargetsInstalled test says which).
#ifndef HYPER_PARALLEL_TESTS_KERNELS_TARGET_FIXTURE_H_
#define HYPER_PARALLEL_TESTS_KERNELS_TARGET_FIXTURE_H_

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/bfloat16.h"
#include "common/cpu_features.h"
#include "common/printers.h"
#include "kernels/kernels.h"

namespace hp::kernels::testing {

#define HP_ASSERT_OK(expr)                                     \
  do {                                                         \
    const ::hp::Status hp_status_ = (expr);                    \
    ASSERT_TRUE(hp_status_.is_ok()) << hp_status_.to_string(); \
  } while (0)

inline std::filesystem::path test_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path();
}

inline const std::vector<std::string>& targets_under_test() {
  static const std::vector<std::string> names = {"x86_64_v3", "x86_64_v4", "x86_64_v4_fma",
                                                 "x86_64_amx", "x86_64_amx_emulated"};
  return names;
}

// Loads a target; skips the test when this CPU cannot run it.
inline const KernelTable* load_or_skip(const std::string& name) {
  const KernelTable* table = nullptr;
  Status s;
  if (name == "x86_64_amx_emulated") {
    const CpuFeatures& cpu = cpu_features();
    if (!cpu_supports("x86_64_v4", cpu) || !cpu.avx512_bf16) {
      return nullptr;  // the emulated tiles still run AVX-512 (VNNI, BF16) code
    }
    s = load_target_library(
        (test_dir() / "lib" / "libhyper_parallel_kernels_x86_64_amx_emulated.so").string(), "",
        &table);
  } else if (name == "x86_64_v4_fma") {  // v4's bf16 GEMMs on FMAs, where v4 itself uses vdpbf16ps
    if (!cpu_supports("x86_64_v4", cpu_features())) return nullptr;
    s = load_target_library(
        (test_dir() / "lib" / "libhyper_parallel_kernels_x86_64_v4_fma.so").string(), "", &table);
  } else {
    s = load_target(name, &table);
    if (s.code() == ErrorCode::kIsaUnsupported) return nullptr;
  }
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return s.is_ok() ? table : nullptr;
}

class TargetTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    table_ = load_or_skip(GetParam());
    if (!table_ && !HasFailure())
      GTEST_SKIP() << GetParam() << ": this CPU lacks its instructions ("
                   << cpu_features().to_string() << ")";
    ASSERT_NE(table_, nullptr);
    Status s = load_target("reference", &reference_);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  const KernelTable& target() const { return *table_; }
  const KernelTable& reference() const { return *reference_; }

  const KernelTable* table_ = nullptr;
  const KernelTable* reference_ = nullptr;
};

inline std::string target_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

#define HP_INSTANTIATE_FOR_TARGETS(suite)                                                     \
  INSTANTIATE_TEST_SUITE_P(Targets, suite,                                                    \
                           ::testing::ValuesIn(::hp::kernels::testing::targets_under_test()), \
                           ::hp::kernels::testing::target_name)

struct Rng {
  std::mt19937_64 engine;
  explicit Rng(std::uint64_t seed) : engine(seed) {}
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(engine);
  }
  float real(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine); }
  std::vector<std::int8_t> int8s(std::size_t n, int lo = -128, int hi = 127) {
    std::vector<std::int8_t> v(n);
    for (auto& x : v) x = std::int8_t(uniform(lo, hi));
    return v;
  }
  std::vector<float> reals(std::size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto& x : v) x = real(lo, hi);
    return v;
  }
};

inline std::vector<std::int64_t> prefix_sums(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> o{0};
  for (std::int64_t s : sizes) o.push_back(o.back() + s);
  return o;
}

}  // namespace hp::kernels::testing

#endif  // HYPER_PARALLEL_TESTS_KERNELS_TARGET_FIXTURE_H_
