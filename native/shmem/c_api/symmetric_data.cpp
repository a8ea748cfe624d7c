// The program's global and static variables as symmetric data objects (OpenSHMEM 1.5 §3:
// "global and static variables ... are symmetric"), on top of hp::shmem, whose RMA only
// reaches its symmetric heap.
//
// At shmem_init every PE moves the writable segment of its executable (.data and .bss, after
// the read-only-after-relocation part) into a block of the symmetric heap: the block gets the
// segment's contents, then the segment's pages are replaced by a second mapping of the block's
// pages (mremap of a shared mapping with old size 0). The program's own loads and stores and
// every PE's RMA, atomics and waits then reach the same memory; the routines translate an
// address inside the segment into the block (sym()) before they hand it to hp::shmem. Every PE
// runs the same executable, so the blocks have the same size and offset everywhere (checked).
//
// Caveats: call shmem_init before starting threads (a store between the copy and the remap
// would be lost); after a fork the child shares these variables with its parent.
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "shmem/c_api/c_api.h"

namespace hp::shmem::c_api {

DataSegment g_data;

namespace {

struct Range {
  std::uintptr_t begin = 0, end = 0;
};

// The executable's writable PT_LOAD segment, whole pages, without its RELRO prefix.
int find_segment(dl_phdr_info* info, std::size_t, void* out) {
  const auto page = std::uintptr_t(sysconf(_SC_PAGESIZE));
  Range writable, relro;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const Range r{info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) != 0 && writable.end == 0) writable = r;
    if (ph.p_type == PT_GNU_RELRO) relro = r;
  }
  auto* segment = static_cast<Range*>(out);
  std::uintptr_t begin = writable.begin / page * page;
  if (relro.begin <= begin && relro.end > begin) begin = (relro.end + page - 1) / page * page;
  const std::uintptr_t end = (writable.end + page - 1) / page * page;
  if (writable.end != 0 && begin < end) *segment = {begin, end};
  return 1;  // the first object is the executable: stop there
}

Status errno_status(const char* what) {
  return Status::error(ErrorCode::kSystemError, "shmem_init: {}: {}", what, std::strerror(errno));
}

// Copies whole pages of the segment without the sanitizers' checks: they span the redzones
// AddressSanitizer puts between globals. Volatile loads keep the loop from becoming a memcpy
// call, which the sanitizer would check.
__attribute__((no_sanitize("address", "thread"))) void copy_pages(std::byte* to,
                                                                  const std::byte* from,
                                                                  std::size_t bytes) {
  auto* out = reinterpret_cast<std::uint64_t*>(to);
  const auto* in = reinterpret_cast<const volatile std::uint64_t*>(from);
  for (std::size_t i = 0; i < bytes / sizeof(std::uint64_t); ++i) out[i] = in[i];
}

// Makes [segment.begin, segment.end) a second mapping of the heap block `block`.
Status alias(std::byte* block, const Range& segment) {
  const std::size_t bytes = segment.end - segment.begin;
  void* target = reinterpret_cast<void*>(segment.begin);
  void* mapped = mremap(block, 0, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  if (mapped == MAP_FAILED && errno == EINVAL && n_pes() == 1) {
    // A one-PE job's heap is private memory, which has no second mapping: nobody else maps
    // it, so the block can move to shared memory first.
    void* shared =
        mmap(block, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (shared == MAP_FAILED) return errno_status("cannot back the data segment's block");
    copy_pages(block, static_cast<const std::byte*>(target), bytes);
    mapped = mremap(block, 0, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  }
  if (mapped == MAP_FAILED) {
    return errno_status("cannot map the data segment into the symmetric heap");
  }
  return Status::ok();
}

}  // namespace

Status map_data_segment() {
  Range segment;
  dl_iterate_phdr(find_segment, &segment);
  if (segment.begin == segment.end) return Status::ok();
  const std::size_t bytes = segment.end - segment.begin;
  void* raw = nullptr;
  Status s = align(std::size_t(sysconf(_SC_PAGESIZE)), bytes, &raw);
  if (!s.is_ok()) {
    return s.with_context(fmt::format(
        "shmem_init: the program's global and static variables ({} bytes) need as much of the "
        "symmetric heap",
        bytes));
  }
  auto* block = static_cast<std::byte*>(raw);
  // Same executable everywhere: compare this PE's size with PE 0's through the block.
  std::uint64_t theirs = 0;
  std::memcpy(block, &bytes, sizeof(std::uint64_t));
  HP_RETURN_IF_ERROR(sync_all());
  HP_RETURN_IF_ERROR(get(&theirs, block, sizeof theirs, 0));
  HP_RETURN_IF_ERROR(sync_all());  // nobody reads the block before it holds the segment
  HP_ENSURE(theirs == bytes, ErrorCode::kInvalidArgument,
            "shmem_init: PE {} has {} bytes of global and static variables and PE 0 has {}: every "
            "PE must run the same executable",
            my_pe(), bytes, theirs);
  copy_pages(block, reinterpret_cast<const std::byte*>(segment.begin), bytes);
  HP_RETURN_IF_ERROR(alias(block, segment));
  g_data = {reinterpret_cast<std::byte*>(segment.begin), reinterpret_cast<std::byte*>(segment.end),
            block};
  return sync_all();  // nobody writes into a block before its PE moved the segment there
}

}  // namespace hp::shmem::c_api
