// The helpers of c_api.h.
#include "shmem/c_api/c_api.h"

#include <sched.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "common/settings.h"
#include "platform/wait.h"

namespace hp::shmem::c_api {
namespace {

void print_error(const char* routine, const Status& status) {
  std::fprintf(stderr, "hp shmem: %s: %s\n", routine, status.to_string().c_str());
}

}  // namespace

void fail(const char* routine, const Status& status) {
  print_error(routine, status);
  std::fflush(nullptr);
  std::_Exit(1);
}

int report(const char* routine, const Status& status) {
  if (status.is_ok()) return 0;
  print_error(routine, status);
  std::fflush(stderr);
  return 1;
}

Status checked_bytes(const char* routine, std::size_t count, std::size_t size, std::size_t* bytes) {
  HP_ENSURE(!__builtin_mul_overflow(count, size, bytes), ErrorCode::kInvalidArgument,
            "{}: {} elements of {} bytes overflow size_t", routine, count, size);
  return Status::ok();
}

Status to_cmp(const char* routine, int cmp, Cmp* out) {
  HP_ENSURE(cmp >= SHMEM_CMP_EQ && cmp <= SHMEM_CMP_LE, ErrorCode::kInvalidArgument,
            "{}: comparison {} is not one of SHMEM_CMP_EQ, _NE, _GT, _GE, _LT, _LE", routine, cmp);
  *out = Cmp(cmp);
  return Status::ok();
}

Status check_local_words(const char* routine, const void* words, std::size_t n, std::size_t size) {
  const int me = my_pe();
  HP_ENSURE(me >= 0, ErrorCode::kFailedPrecondition, "{} called before shmem_init", routine);
  if (n == 0) return Status::ok();
  std::size_t bytes = 0;
  HP_RETURN_IF_ERROR(checked_bytes(routine, n, size, &bytes));
  const auto* first = static_cast<const char*>(words);
  HP_ENSURE(addr_accessible(first, me) && addr_accessible(first + (bytes - 1), me),
            ErrorCode::kNotSymmetric,
            "{}: [{}, +{} bytes) is not inside PE {}'s symmetric heap; use memory from "
            "shmem_malloc",
            routine, words, bytes, me);
  HP_ENSURE(reinterpret_cast<std::uintptr_t>(words) % size == 0, ErrorCode::kMisaligned,
            "{}: {} is not {}-byte aligned", routine, words, size);
  return Status::ok();
}

Status invalid_team(const char* routine, const char* which) {
  return Status::error(ErrorCode::kInvalidArgument,
                       "{}: {} is SHMEM_TEAM_INVALID or not a team of PE {}", routine, which,
                       my_pe());
}

Status wait_until_ready(const std::function<bool()>& ready,
                        const std::function<std::string()>& describe) {
  return wait_for(ready, describe());
}

}  // namespace hp::shmem::c_api
