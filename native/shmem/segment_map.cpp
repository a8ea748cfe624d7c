#include "shmem/segment_map.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "common/settings.h"
#include "platform/memory_binding.h"

namespace hp::shmem {

Status map_segment_aligned(int fd, std::size_t bytes, std::size_t heap_offset, bool reserve,
                           std::byte** out, std::span<const int> mem_nodes) {
  const std::size_t alignment = heap_alignment(bytes - heap_offset);
  const std::size_t reserved = bytes + alignment;
  void* reservation =
      mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reservation == MAP_FAILED) {
    return Status::error(ErrorCode::kOutOfMemory, "cannot reserve {} bytes of address space: {}",
                         reserved, std::strerror(errno));
  }
  auto* start =
      static_cast<std::byte*>(reservation) + alignment_skip(reservation, heap_offset, alignment);
  const int flags =
      MAP_FIXED | (fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
  void* mapped = mmap(start, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (mapped == MAP_FAILED) {
    const int err = errno;
    munmap(reservation, reserved);
    return Status::error(err == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kSystemError,
                         "cannot map a {}-byte segment: {}", bytes, std::strerror(err));
  }
  Status s = mem_nodes.empty()
                 ? Status::ok()
                 : platform::bind_memory(start, bytes, mem_nodes).with_context("HP_MEM_NODES");
  // After the binding: the object's pages are allocated under its policy.
  if (s.is_ok() && reserve && fd >= 0) {
    const int err = fallocate(fd, 0, 0, off_t(bytes)) == 0 ? 0 : errno;
    if (err != 0) {
      s = Status::error(
          err == ENOSPC || err == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kSystemError,
          "cannot allocate {} bytes of shared memory{}: {}", bytes,
          mem_nodes.empty() ? "" : " on NUMA node(s) " + format_cpu_list(mem_nodes),
          std::strerror(err));
    }
  }
  if (!s.is_ok()) {
    munmap(reservation, reserved);
    return s;
  }
  // Release the reservation around the segment.
  auto* reservation_end = static_cast<std::byte*>(reservation) + reserved;
  if (start > reservation)
    munmap(reservation, std::size_t(start - static_cast<std::byte*>(reservation)));
  if (start + bytes < reservation_end)
    munmap(start + bytes, std::size_t(reservation_end - (start + bytes)));
  *out = start;
  return Status::ok();
}

}  // namespace hp::shmem
