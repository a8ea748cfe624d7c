// Fuzz target: an op package's ops.json (hp::ops::read_package), which a vendor package on
// HP_VENDOR_PATH brings. Input: the ops.json.
//
// Expected: it reads, or fails with CORRUPT_DATA (or IO_ERROR); a package that reads names a
// library inside its directory's tree by a relative path, and lists its ops.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "ops/op_lookup.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& dir = hp::fuzz::scratch_dir();
  hp::fuzz::write_file(dir + "/ops.json",
                       std::string_view(reinterpret_cast<const char*>(data), size));
  hp::ops::OpPackage package;
  const hp::Status s = hp::ops::read_package(dir, &package);
  hp::fuzz::expect_status(s, {hp::ErrorCode::kCorruptData, hp::ErrorCode::kIoError},
                          "read_package");
  if (!s.is_ok()) return 0;
  const auto inside = std::filesystem::path(package.library).lexically_relative(dir);
  if (package.library.empty() || inside.empty() || *inside.begin() == "..") {
    hp::fuzz::fail("a package reads whose library is outside it: " + package.library);
  }
  return 0;
}
