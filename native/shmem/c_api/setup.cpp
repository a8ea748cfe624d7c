// Library setup, exit and query routines, and symmetric memory management.
//
// shmem_init registers an at-exit handler that finalizes what the program did not, so a PE that
// returns from main (or calls exit) without shmem_finalize still ends cleanly. Failures and
// shmem_global_exit end the process without it (see fail()).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "shmem/c_api/c_api.h"

namespace c_api = hp::shmem::c_api;
using c_api::check;
using hp::ErrorCode;
using hp::Status;

namespace {

// shmem_pcontrol's level (1, the default, until a program sets another).
std::atomic<int> g_profiling_level{1};

std::mutex g_mutex;
int g_inits = 0;  // shmem_init/shmem_init_thread calls not yet matched by shmem_finalize
bool g_at_exit_registered = false;
// The size asked for each live block from shmem_malloc/calloc/align/realloc: what
// shmem_realloc copies.
std::unordered_map<void*, std::size_t> g_block_sizes;

void finalize_at_exit() {
  std::lock_guard lock(g_mutex);
  for (; g_inits > 0; --g_inits) check("shmem_finalize (at exit)", hp::shmem::finalize());
}

// Initializes (or nests another init); on failure the library is as before the call. Every PE
// fails the collective steps alike (the same heap size, the same executable), so none is left
// waiting in them.
Status init() {
  HP_RETURN_IF_ERROR(hp::shmem::init());
  std::lock_guard lock(g_mutex);
  if (g_inits == 0) {
    if (Status s = c_api::map_data_segment(); !s.is_ok()) {
      (void)hp::shmem::finalize();
      c_api::g_data = {};
      return s;
    }
  }
  ++g_inits;
  if (!g_at_exit_registered) {
    g_at_exit_registered = true;
    HP_ENSURE(std::atexit(finalize_at_exit) == 0, ErrorCode::kSystemError,
              "atexit() refused the finalize handler");
  }
  return Status::ok();
}

// An allocation's result: the block, or NULL after printing why (OUT_OF_MEMORY and bad
// arguments are the same on every PE, so every PE returns NULL). Other failures end the process.
void* allocated(const char* routine, const Status& status, void* block, std::size_t size) {
  if (status.is_ok()) {
    std::lock_guard lock(g_mutex);
    g_block_sizes[block] = size;
    return block;
  }
  if (status.code() != ErrorCode::kOutOfMemory && status.code() != ErrorCode::kInvalidArgument) {
    c_api::fail(routine, status);
  }
  c_api::report(routine, status);
  return nullptr;
}

void release(const char* routine, void* ptr) {
  check(routine, hp::shmem::free(ptr));
  std::lock_guard lock(g_mutex);
  g_block_sizes.erase(ptr);
}

}  // namespace

extern "C" {

// shmem_init has no status to return: a failure ends the process; shmem_init_thread returns it.
void shmem_init(void) { check("shmem_init", init()); }

int shmem_init_thread(int requested, int* provided) {
  if (requested < SHMEM_THREAD_SINGLE || requested > SHMEM_THREAD_MULTIPLE) {
    return c_api::report("shmem_init_thread",
                         Status::error(ErrorCode::kInvalidArgument,
                                       "requested thread level {} is not one of "
                                       "SHMEM_THREAD_SINGLE, _FUNNELED, _SERIALIZED, _MULTIPLE",
                                       requested));
  }
  if (const int failed = c_api::report("shmem_init_thread", init()); failed != 0) return failed;
  if (provided != nullptr) *provided = SHMEM_THREAD_MULTIPLE;
  return 0;
}

void shmem_query_initialized(int* initialized) {
  std::lock_guard lock(g_mutex);
  *initialized = g_inits > 0 ? 1 : 0;
}

// Every routine may be called from any thread of a PE (collectives still one call per PE).
void shmem_query_thread(int* provided) {
  if (provided != nullptr) *provided = SHMEM_THREAD_MULTIPLE;
}

void shmem_finalize(void) {
  std::lock_guard lock(g_mutex);
  check("shmem_finalize", hp::shmem::finalize());
  if (g_inits > 0) --g_inits;
  if (!hp::shmem::initialized()) {  // the heap is gone (the variables keep their pages)
    g_block_sizes.clear();
    c_api::g_data = {};
    c_api::release_contexts();
    c_api::forget_team_configs();
  }
}

void shmem_global_exit(int status) { hp::shmem::global_exit(status); }

int shmem_my_pe(void) { return hp::shmem::my_pe(); }

int shmem_n_pes(void) { return hp::shmem::n_pes(); }

int shmem_pe_accessible(int pe) { return hp::shmem::transport_name(pe).empty() ? 0 : 1; }

int shmem_addr_accessible(const void* addr, int pe) {
  return hp::shmem::addr_accessible(c_api::sym(addr), pe) ? 1 : 0;
}

void* shmem_ptr(const void* dest, int pe) { return hp::shmem::ptr(c_api::sym(dest), pe); }

void* shmem_team_ptr(shmem_team_t team, const void* dest, int pe) {
  const int world_pe =
      hp::shmem::team_translate_pe(c_api::to_team(team), pe, hp::shmem::kTeamWorld);
  return world_pe < 0 ? nullptr : hp::shmem::ptr(c_api::sym(dest), world_pe);
}

void shmem_info_get_version(int* major, int* minor) {
  *major = SHMEM_MAJOR_VERSION;
  *minor = SHMEM_MINOR_VERSION;
}

// The names before OpenSHMEM 1.2 (shmem.h).
void start_pes(int npes) {
  (void)npes;
  check("start_pes", init());
}
int _my_pe(void) { return shmem_my_pe(); }
int _num_pes(void) { return shmem_n_pes(); }
void* shmalloc(size_t size) { return shmem_malloc(size); }
void shfree(void* ptr) { shmem_free(ptr); }
void* shrealloc(void* ptr, size_t size) { return shmem_realloc(ptr, size); }
void* shmemalign(size_t alignment, size_t size) { return shmem_align(alignment, size); }
// Every PE's memory is coherent here: no cache to invalidate or flush.
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void* dest) { (void)dest; }
void shmem_set_cache_line_inv(void* dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void* dest) { (void)dest; }

// No profiling library is interposed on this one's routines: the level is kept, and nothing
// else depends on it.
void shmem_pcontrol(const int level, ...) { g_profiling_level.store(level); }

void shmem_info_get_name(char* name) {
  static_assert(sizeof(SHMEM_VENDOR_STRING) <= SHMEM_MAX_NAME_LEN);
  std::memcpy(name, SHMEM_VENDOR_STRING, sizeof(SHMEM_VENDOR_STRING));
}

// ---- symmetric memory ---------------------------------------------------------------------
// A size of 0 returns NULL without a barrier, as OpenSHMEM 1.5 allows.

void* shmem_malloc(size_t size) {
  if (size == 0) return nullptr;
  void* block = nullptr;
  Status s = hp::shmem::malloc(size, &block);
  return allocated("shmem_malloc", s, block, size);
}

void* shmem_malloc_with_hints(size_t size, long hints) {
  (void)hints;
  if (size == 0) return nullptr;
  void* block = nullptr;
  Status s = hp::shmem::malloc(size, &block);
  return allocated("shmem_malloc_with_hints", s, block, size);
}

void* shmem_calloc(size_t count, size_t size) {
  if (count == 0 || size == 0) return nullptr;
  void* block = nullptr;
  Status s = hp::shmem::calloc(count, size, &block);
  return allocated("shmem_calloc", s, block, count * size);  // calloc checked the product
}

void* shmem_align(size_t alignment, size_t size) {
  if (size == 0) return nullptr;
  void* block = nullptr;
  Status s = Status::ok();
  if (alignment == 0) {  // still the barrier every PE's (failed) allocation ends with
    check("shmem_align", hp::shmem::barrier_all());
    s = Status::error(ErrorCode::kInvalidArgument, "alignment 0 is not a power of two");
  } else {
    s = hp::shmem::align(alignment, size, &block);
  }
  return allocated("shmem_align", s, block, size);
}

// Collective: a new block (on failure NULL, and `ptr` stays), a copy of min(old, new) bytes on
// every PE, then `ptr` freed.
void* shmem_realloc(void* ptr, size_t size) {
  if (ptr == nullptr) return shmem_malloc(size);
  if (size == 0) {
    release("shmem_realloc", ptr);
    return nullptr;
  }
  std::size_t old_size = 0;
  {
    std::lock_guard lock(g_mutex);
    auto it = g_block_sizes.find(ptr);
    if (it == g_block_sizes.end()) {
      c_api::fail("shmem_realloc",
                  Status::error(ErrorCode::kNotSymmetric,
                                "{} is not a live block from shmem_malloc, shmem_calloc, "
                                "shmem_align or shmem_realloc",
                                ptr));
    }
    old_size = it->second;
  }
  void* block = nullptr;
  Status s = hp::shmem::malloc(size, &block);
  if (allocated("shmem_realloc", s, block, size) == nullptr) return nullptr;
  std::memcpy(block, ptr, std::min(old_size, size));
  release("shmem_realloc", ptr);
  return block;
}

void shmem_free(void* ptr) { release("shmem_free", ptr); }

}  // extern "C"
