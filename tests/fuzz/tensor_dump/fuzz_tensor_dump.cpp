// Fuzz target: the argument-dump reader (TensorDump::open, find, read) and hp-dump's printer,
// which read files another run wrote. Input: tensor_dump.json, a NUL byte, tensor_dump.bin
// (no NUL: the .bin is empty).
//
// Expected: open() succeeds or is CORRUPT_DATA / NOT_FOUND / IO_ERROR; once open, every entry's
// captured values read back with exactly the bytes the entry claims, and print.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "runtime/tensor_dump_printer.h"
#include "runtime/tensor_dump_reader.h"

using hp::ErrorCode;
using hp::runtime::DumpPhase;
using hp::runtime::TensorDump;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string& dir = hp::fuzz::scratch_dir();
  hp::fuzz::write_file(dir + "/tensor_dump.json", input.substr(0, nul));
  hp::fuzz::write_file(dir + "/tensor_dump.bin",
                       nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1));

  TensorDump dump;
  const hp::Status opened = TensorDump::open(dir, &dump);
  hp::fuzz::expect_status(opened,
                          {ErrorCode::kCorruptData, ErrorCode::kNotFound, ErrorCode::kIoError},
                          "TensorDump::open");
  if (!opened.is_ok()) return 0;

  (void)hp::runtime::format_dump_listing(dump);
  for (const hp::runtime::TensorDumpEntry& entry : dump.entries()) {
    const hp::runtime::TensorDumpEntry* found = nullptr;
    if (!dump.find(entry.task, entry.kind, entry.arg, &found).is_ok()) {
      hp::fuzz::fail("find() misses an entry that entries() lists");
    }
    for (DumpPhase phase : {DumpPhase::kBefore, DumpPhase::kAfter}) {
      const auto& range = phase == DumpPhase::kBefore ? entry.before : entry.after;
      std::vector<std::byte> bytes;
      const hp::Status read = dump.read(entry, phase, &bytes);
      if (!range) {
        hp::fuzz::expect_status(read, {ErrorCode::kNotFound}, "TensorDump::read (no capture)");
        continue;
      }
      if (!read.is_ok() || bytes.size() != range->bytes) {
        hp::fuzz::fail("an entry open() accepted does not read back: " + read.to_string());
      }
      (void)hp::runtime::format_dump_header(entry, phase);
      (void)hp::runtime::format_dump_values(entry, bytes, {.max_elements = 64});
    }
  }
  return 0;
}
