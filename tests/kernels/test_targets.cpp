// Target selection: the payload's vendor, CPUID, the HP_KERNEL_TARGET override, and the
// errors of each way it can go wrong.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "kernels/target_fixture.h"

namespace hp::kernels::testing {
namespace {

namespace fs = std::filesystem;

fs::path payload_dir() {
  return test_dir().parent_path().parent_path() / "payload" / "hyper_parallel";
}

struct InfoRun {
  int exit_code;
  nlohmann::json out;
};

// Runs hp-kernel-info (from `slice`/bin) with an environment prefix, e.g. "HP_KERNEL_TARGET=x".
InfoRun kernel_info(const fs::path& slice, const std::string& env) {
  const std::string command =
      "env -u HP_KERNEL_TARGET " + env + " " + (slice / "bin" / "hp-kernel-info").string();
  FILE* pipe = popen(command.c_str(), "r");
  std::string text;
  char buffer[4096];
  while (pipe && std::fgets(buffer, sizeof(buffer), pipe)) text += buffer;
  const int status = pipe ? pclose(pipe) : -1;
  InfoRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            nlohmann::json::parse(text, nullptr, false)};
  return r;
}

std::string best_supported(const std::vector<std::string>& installed) {
  for (const std::string& name : installed) {
    if (cpu_supports(name, cpu_features())) return name;
  }
  return "";
}

TEST(Targets, EveryTargetOfThePayloadIsInstalled) {
  std::ifstream in(payload_dir() / "manifest.json");
  ASSERT_TRUE(in) << payload_dir();
  const nlohmann::json manifest = nlohmann::json::parse(in);
  const std::vector<std::string> installed = installed_targets();
  for (const std::string soc : manifest.at("soc_list")) {
    if (soc == "sm_90") continue;
    EXPECT_NE(std::find(installed.begin(), installed.end(), soc), installed.end())
        << soc << " is missing";
  }
}

TEST(Targets, SelectsTheBestTargetThisCpuSupports) {
  const std::string best = best_supported(installed_targets());
  const KernelTable* table = nullptr;
  const Status s = selected_target(&table);
  if (best.empty()) {
    EXPECT_EQ(s.code(), ErrorCode::kIsaUnsupported);
    return;
  }
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(std::string(table->target), best);
  EXPECT_EQ(table->version, kKernelTableVersion);
  EXPECT_GE(table->size, sizeof(KernelTable));
}

TEST(Targets, RequirementsFollowCpuid) {
  CpuFeatures none;
  for (const SocTarget& t : soc_targets()) EXPECT_FALSE(cpu_supports(t.name, none)) << t.name;
  EXPECT_TRUE(cpu_supports("reference", none));
  CpuFeatures v3;
  v3.avx2 = v3.fma = v3.f16c = true;
  EXPECT_TRUE(cpu_supports("x86_64_v3", v3));
  EXPECT_FALSE(cpu_supports("x86_64_v4", v3));
  CpuFeatures amx_without_avx512 = v3;
  amx_without_avx512.amx_tile = amx_without_avx512.amx_int8 = amx_without_avx512.amx_bf16 = true;
  EXPECT_FALSE(cpu_supports("x86_64_amx", amx_without_avx512));
  EXPECT_FALSE(cpu_supports("x86_64_v9", v3));
}

TEST(Targets, UnknownAndUnsupportedNamesAreErrors) {
  const KernelTable* table = nullptr;
  EXPECT_EQ(load_target("x86_64_v9", &table).code(), ErrorCode::kUnsupported);
  if (!cpu_supports("x86_64_amx", cpu_features())) {
    const Status s = load_target("x86_64_amx", &table);
    EXPECT_EQ(s.code(), ErrorCode::kIsaUnsupported);
    EXPECT_NE(s.message().find("amx_tile"), std::string::npos) << s.message();
  }
  // A library without a kernel table.
  const Status s = load_target_library(
      (payload_dir() / "core" / "lib" / "libhyper_parallel_common.so").string(), "", &table);
  EXPECT_EQ(s.code(), ErrorCode::kCorruptData) << s.to_string();
  EXPECT_EQ(load_target_library("/nonexistent/libx.so", "", &table).code(), ErrorCode::kNotFound);
}

TEST(Targets, AmxPermissionIsAskedOnceAndAgreesWithCpuid) {
  std::vector<std::thread> threads;
  std::vector<ErrorCode> codes(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&codes, i] { codes[std::size_t(i)] = request_amx_permission().code(); });
  for (auto& t : threads) t.join();
  for (ErrorCode c : codes) EXPECT_EQ(c, codes[0]);
  if (cpu_features().amx_tile) {
    EXPECT_EQ(codes[0], ErrorCode::kOk);
  } else {
    EXPECT_EQ(codes[0], ErrorCode::kIsaUnsupported);
  }
}

TEST(Targets, OverrideForcesATarget) {
  const fs::path slice = payload_dir() / "multicore";
  for (const std::string& name : installed_targets()) {
    const InfoRun r = kernel_info(slice, "HP_KERNEL_TARGET=" + name);
    if (cpu_supports(name, cpu_features())) {
      EXPECT_EQ(r.exit_code, 0) << r.out.dump();
      EXPECT_EQ(r.out.value("selected", nlohmann::json()).dump(), "\"" + name + "\"")
          << r.out.dump();
    } else {
      EXPECT_EQ(r.exit_code, 1) << r.out.dump();
      EXPECT_EQ(r.out["error"]["code"], "ISA_UNSUPPORTED") << r.out.dump();
    }
  }
  const InfoRun ref = kernel_info(slice, "HP_KERNEL_TARGET=reference");
  EXPECT_EQ(ref.out["selected"], "reference") << ref.out.dump();
  const InfoRun bad = kernel_info(slice, "HP_KERNEL_TARGET=x86_64_v9");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out["error"]["code"], "INVALID_SETTING") << bad.out.dump();
  const InfoRun none = kernel_info(slice, "");
  EXPECT_EQ(none.out["selected"], best_supported(installed_targets())) << none.out.dump();
}

// A vendor whose only targets this CPU cannot run: selection fails with ISA_UNSUPPORTED and
// says how to rebuild.
TEST(Targets, AVendorWithoutARunnableTargetIsIsaUnsupported) {
  std::vector<std::string> unrunnable;
  for (const std::string& name : installed_targets()) {
    if (!cpu_supports(name, cpu_features())) unrunnable.push_back(name);
  }
  if (unrunnable.empty()) GTEST_SKIP() << "this CPU runs every installed target";
  const fs::path root =
      fs::temp_directory_path() / ("hp-kernels-vendor-" + std::to_string(getpid()));
  fs::remove_all(root);
  const fs::path slice = root / "hyper_parallel" / "multicore", from = payload_dir() / "multicore";
  fs::create_directories(slice / "bin");
  fs::create_directories(slice / "lib" / "kernels");
  fs::create_symlink(payload_dir() / "core", root / "hyper_parallel" / "core");
  fs::copy_file(from / "bin" / "hp-kernel-info", slice / "bin" / "hp-kernel-info");
  fs::copy_file(from / "lib" / "libhyper_parallel_kernels.so",
                slice / "lib" / "libhyper_parallel_kernels.so");
  for (const std::string& name : unrunnable) {
    const std::string file = "libhyper_parallel_kernels_" + name + ".so";
    fs::copy_file(from / "lib" / "kernels" / file, slice / "lib" / "kernels" / file);
  }
  const InfoRun r = kernel_info(slice, "");
  fs::remove_all(root);
  EXPECT_EQ(r.exit_code, 1) << r.out.dump();
  EXPECT_EQ(r.out["error"]["code"], "ISA_UNSUPPORTED") << r.out.dump();
  const std::string message = r.out["error"]["message"];
  EXPECT_NE(message.find(unrunnable.front()), std::string::npos) << message;
  EXPECT_NE(message.find("./build.sh --soc-list"), std::string::npos) << message;
}

}  // namespace
}  // namespace hp::kernels::testing
