#include "platform/memory_binding.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/ranges.h>

namespace hp::platform {
namespace {

// The node masks passed to the kernel: one bit per node, kMaxNodes bits.
constexpr int kMaxNodes = 1024;
constexpr int kBitsPerWord = int(sizeof(unsigned long) * 8);
using NodeMask = unsigned long[kMaxNodes / kBitsPerWord];

}  // namespace

Status bind_memory(void* addr, std::size_t bytes, std::span<const int> nodes) {
  HP_ENSURE(!nodes.empty(), ErrorCode::kInvalidArgument,
            "bind_memory needs at least one NUMA node");
  NodeMask mask = {};
  for (int node : nodes) {
    HP_ENSURE(node >= 0 && node < kMaxNodes, ErrorCode::kInvalidArgument,
              "NUMA node {} is out of range [0, {})", node, kMaxNodes);
    mask[node / kBitsPerWord] |= 1ul << (node % kBitsPerWord);
  }
  // maxnode counts one bit more than the mask holds (the kernel drops the last bit).
  if (syscall(SYS_mbind, addr, bytes, MPOL_BIND, mask, kMaxNodes + 1, MPOL_MF_MOVE) != 0) {
    const int err = errno;
    return Status::error(err == EINVAL ? ErrorCode::kInvalidArgument : ErrorCode::kSystemError,
                         "mbind of {} bytes to NUMA node(s) {} failed: {}{}", bytes,
                         fmt::join(nodes, ","), std::strerror(err),
                         err == EINVAL ? " (is each node online and in this process's cpuset? "
                                         "see /sys/devices/system/node)"
                                       : "");
  }
  return Status::ok();
}

Status memory_binding(const void* addr, std::vector<int>* nodes) {
  nodes->clear();
  int mode = 0;
  NodeMask mask = {};
  if (syscall(SYS_get_mempolicy, &mode, mask, kMaxNodes + 1, addr, MPOL_F_ADDR) != 0) {
    return Status::error(ErrorCode::kSystemError, "get_mempolicy failed: {}", std::strerror(errno));
  }
  if ((mode & ~MPOL_MODE_FLAGS) != MPOL_BIND) return Status::ok();
  for (int node = 0; node < kMaxNodes; ++node) {
    if (mask[node / kBitsPerWord] & (1ul << (node % kBitsPerWord))) nodes->push_back(node);
  }
  return Status::ok();
}

}  // namespace hp::platform
