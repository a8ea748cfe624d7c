// The vendor note: what a kernel target library declares about its build, in the ELF section
// ".hp_vendor", so that the build's vendor merge (scripts/vendor_merge.py, docs/build.md) reads
// it from the file without loading the library.
//
// Layout (little-endian, 128 bytes, read by vendor_merge.py; the magic names its version):
//   char     magic[8]        "HPVNDR1"
//   uint32   table_version   kKernelTableVersion of this compilation
//   uint32   table_size      sizeof(KernelTable)
//   uint64   table_layout    kernel_table_layout_digest()
//   char     target[32]      the SoC target the library is built for
//   char     identity[72]    the build-input identity: hex SHA-256 over the sources and headers
//                            every target shares, the compiler and the flags that are not
//                            per-target (native/kernels/CMakeLists.txt, HP_KERNEL_BUILD_IDENTITY)
#ifndef HYPER_PARALLEL_KERNELS_VENDOR_NOTE_H_
#define HYPER_PARALLEL_KERNELS_VENDOR_NOTE_H_

#include <cstdint>

#include "kernels/kernel_table.h"

namespace hp::kernels {

struct VendorNote {
  char magic[8];
  std::uint32_t table_version;
  std::uint32_t table_size;
  std::uint64_t table_layout;
  char target[32];
  char identity[72];
};
static_assert(sizeof(VendorNote) == 128,
              "the vendor note's layout is read byte by byte by the build");

}  // namespace hp::kernels

#ifndef HP_KERNEL_BUILD_IDENTITY
#error \
    "a kernel target is compiled with -DHP_KERNEL_BUILD_IDENTITY=\"<hex>\" (native/kernels/CMakeLists.txt)"
#endif

// One per target library, at namespace scope: the note of the target `target_name`.
#define HP_KERNEL_VENDOR_NOTE(target_name)                                               \
  [[gnu::used,                                                                           \
    gnu::section(".hp_vendor")]] const hp::kernels::VendorNote hp_kernel_vendor_note = { \
      {'H', 'P', 'V', 'N', 'D', 'R', '1', '\0'},                                         \
      hp::kernels::kKernelTableVersion,                                                  \
      sizeof(hp::kernels::KernelTable),                                                  \
      hp::kernels::kernel_table_layout_digest(),                                         \
      target_name,                                                                       \
      HP_KERNEL_BUILD_IDENTITY}

#endif  // HYPER_PARALLEL_KERNELS_VENDOR_NOTE_H_
