#include "segment_map.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace hp::shmem {

Status map_segment_aligned(int fd, std::size_t bytes, std::size_t heap_offset, bool populate,
                           std::byte** out) {
  const std::size_t reserved = bytes + kHeapAlignment;
  void* reservation = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reservation == MAP_FAILED) {
    return Status::error(ErrorCode::kOutOfMemory, "cannot reserve {} bytes of address space: {}",
                         reserved, std::strerror(errno));
  }
  auto* start = static_cast<std::byte*>(reservation) + alignment_skip(reservation, heap_offset);
  const int flags = MAP_FIXED | (populate ? MAP_POPULATE : 0) |
                    (fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
  void* mapped = mmap(start, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (mapped == MAP_FAILED) {
    const int err = errno;
    munmap(reservation, reserved);
    return Status::error(err == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kSystemError,
                         "cannot map a {}-byte segment: {}", bytes, std::strerror(err));
  }
  // Release the reservation around the segment.
  auto* reservation_end = static_cast<std::byte*>(reservation) + reserved;
  if (start > reservation) munmap(reservation, std::size_t(start - static_cast<std::byte*>(reservation)));
  if (start + bytes < reservation_end) munmap(start + bytes, std::size_t(reservation_end - (start + bytes)));
  *out = start;
  return Status::ok();
}

}  // namespace hp::shmem
