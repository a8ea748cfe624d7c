// Communication contexts (OpenSHMEM 1.5 §9.4) and the shmem_ctx_ forms of the RMA and atomic
// routines.
//
// hp::shmem has one stream of operations per PE, so a context is a PE numbering: the default
// context and those of shmem_ctx_create number PEs as SHMEM_TEAM_WORLD, one made by
// shmem_team_create_ctx as its team. Each shmem_ctx_ routine translates its PE and calls the
// routine of the default context (whose name a failure inside reports); shmem_ctx_fence and
// shmem_ctx_quiet are the PE's fence and quiet. The options only promise restrictions (private,
// serialized, no stores) that need nothing here.
#include <array>
#include <atomic>
#include <mutex>

#include "shmem/c_api/c_api.h"

namespace c_api = hp::shmem::c_api;
using c_api::check;
using hp::ErrorCode;
using hp::Status;
using hp::shmem::Team;

namespace {

// Contexts from shmem_ctx_create and shmem_team_create_ctx: slot k holds its team + 1 (0: free),
// handle k + 2 (SHMEM_CTX_INVALID and SHMEM_CTX_DEFAULT are 0 and 1).
constexpr std::size_t kMaxContexts = 1024;
std::array<std::atomic<int>, kMaxContexts> g_slots{};
std::mutex g_create_mutex;

constexpr std::uintptr_t kDefault = 1;

// The team of a live context, or kTeamInvalid.
Team team_of(shmem_ctx_t ctx) {
  const auto value = reinterpret_cast<std::uintptr_t>(ctx);
  if (value == kDefault) return hp::shmem::kTeamWorld;
  if (value < 2 || value - 2 >= kMaxContexts) return hp::shmem::kTeamInvalid;
  return Team(g_slots[value - 2].load(std::memory_order_acquire) - 1);
}

// report_invalid: a team handle that is no team of this PE is reported, not only refused.
int create(const char* routine, Team team, bool report_invalid, shmem_ctx_t* ctx) {
  if (ctx == nullptr) {
    return c_api::report(routine, Status(ErrorCode::kInvalidArgument, "ctx is NULL"));
  }
  *ctx = SHMEM_CTX_INVALID;
  if (hp::shmem::team_my_pe(team) < 0) {
    // SHMEM_TEAM_INVALID (a PE outside a split holds it): no context, non-zero (OpenSHMEM).
    if (team == hp::shmem::kTeamInvalid && !report_invalid) return 1;
    return c_api::report(routine, c_api::invalid_team(routine, "team"));
  }
  std::lock_guard lock(g_create_mutex);
  for (std::size_t k = 0; k < kMaxContexts; ++k) {
    if (g_slots[k].load(std::memory_order_relaxed) == 0) {
      g_slots[k].store(team + 1, std::memory_order_release);
      *ctx = reinterpret_cast<shmem_ctx_t>(k + 2);
      return 0;
    }
  }
  return c_api::report(
      routine, Status::error(ErrorCode::kOutOfMemory, "{} contexts exist already", kMaxContexts));
}

// The team of `ctx`; ends the process naming `routine` when it is no live context.
Team live_team(const char* routine, shmem_ctx_t ctx) {
  const Team team = team_of(ctx);
  if (team == hp::shmem::kTeamInvalid) {
    c_api::fail(routine, Status::error(ErrorCode::kInvalidArgument,
                                       "ctx {} is SHMEM_CTX_INVALID or was destroyed",
                                       static_cast<const void*>(ctx)));
  }
  return team;
}

}  // namespace

namespace hp::shmem::c_api {

int ctx_pe(const char* routine, shmem_ctx_t ctx, int pe) {
  const Team team = live_team(routine, ctx);
  if (team == kTeamWorld) return pe;
  const int world = team_translate_pe(team, pe, kTeamWorld);
  if (world < 0) {
    fail(routine, Status::error(ErrorCode::kOutOfRange,
                                "PE {} is not a PE of the context's team (PEs 0..{})", pe,
                                team_n_pes(team) - 1));
  }
  return world;
}

void release_contexts() {
  std::lock_guard lock(g_create_mutex);
  for (auto& slot : g_slots) slot.store(0, std::memory_order_release);
}

}  // namespace hp::shmem::c_api

extern "C" {

int shmem_ctx_create(long options, shmem_ctx_t* ctx) {
  (void)options;
  return create("shmem_ctx_create", hp::shmem::kTeamWorld, true, ctx);
}

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx) {
  (void)options;
  return create("shmem_team_create_ctx", c_api::to_team(team), team != SHMEM_TEAM_INVALID, ctx);
}

void shmem_ctx_destroy(shmem_ctx_t ctx) {
  const char* routine = "shmem_ctx_destroy";
  if (ctx == SHMEM_CTX_INVALID) return;
  const auto value = reinterpret_cast<std::uintptr_t>(ctx);
  if (value == kDefault || team_of(ctx) == hp::shmem::kTeamInvalid) {
    c_api::fail(routine, Status(ErrorCode::kInvalidArgument,
                                "ctx is SHMEM_CTX_DEFAULT or not a live context"));
  }
  check(routine, hp::shmem::quiet());
  g_slots[value - 2].store(0, std::memory_order_release);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team) {
  const char* routine = "shmem_ctx_get_team";
  if (team == nullptr) {
    return c_api::report(routine, Status(ErrorCode::kInvalidArgument, "team is NULL"));
  }
  const Team t = team_of(ctx);
  *team = c_api::to_handle(t);
  if (t != hp::shmem::kTeamInvalid) return 0;
  if (ctx == SHMEM_CTX_INVALID) return 1;  // *team = SHMEM_TEAM_INVALID (OpenSHMEM)
  return c_api::report(
      routine, Status(ErrorCode::kInvalidArgument, "ctx is SHMEM_CTX_INVALID or destroyed"));
}

// On SHMEM_CTX_INVALID both are no-ops (OpenSHMEM: a PE outside a team's context may call them).
void shmem_ctx_fence(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  (void)live_team("shmem_ctx_fence", ctx);
  shmem_fence();
}

void shmem_ctx_quiet(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  (void)live_team("shmem_ctx_quiet", ctx);
  shmem_quiet();
}
// PEs in the context's numbering; every operation of this PE completes (as shmem_pe_quiet).
void shmem_ctx_pe_quiet(shmem_ctx_t ctx, const int* target_pes, size_t npes) {
  if (ctx == SHMEM_CTX_INVALID) return;
  for (std::size_t i = 0; i < npes; ++i)
    (void)c_api::ctx_pe("shmem_ctx_pe_quiet", ctx, target_pes[i]);
  shmem_quiet();
}
// Sessions are hints (OpenSHMEM 1.6): operations complete as they always do here, so a session
// changes nothing but must name a live context (or SHMEM_CTX_INVALID, a no-op).
void shmem_ctx_session_start(shmem_ctx_t ctx) {
  if (ctx != SHMEM_CTX_INVALID) (void)live_team("shmem_ctx_session_start", ctx);
}
void shmem_ctx_session_stop(shmem_ctx_t ctx) {
  if (ctx != SHMEM_CTX_INVALID) (void)live_team("shmem_ctx_session_stop", ctx);
}

// shmem_ctx_NAME(ctx, PARAMS..., pe) is shmem_NAME(ARGS..., the world PE of pe in ctx).
#define HP_C_UNPAREN(...) __VA_ARGS__
#define HP_C_CTX(RET, NAME, PARAMS, ARGS)                                               \
  RET shmem_ctx_##NAME(shmem_ctx_t ctx, HP_C_UNPAREN PARAMS, int pe) {                  \
    return shmem_##NAME(HP_C_UNPAREN ARGS, c_api::ctx_pe("shmem_ctx_" #NAME, ctx, pe)); \
  }
#define HP_C_CTX_TRANSFER(RET, NAME, DEST, SOURCE) \
  HP_C_CTX(RET, NAME, (DEST * dest, const SOURCE* source, size_t nelems), (dest, source, nelems))
#define HP_C_CTX_STRIDED(NAME, TYPE)                                                       \
  HP_C_CTX(void, NAME,                                                                     \
           (TYPE * dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems), \
           (dest, source, dst, sst, nelems))
#define HP_C_CTX_BLOCKED(NAME, TYPE)                                                     \
  HP_C_CTX(void, NAME,                                                                   \
           (TYPE * dest, const TYPE* source, ptrdiff_t dst, ptrdiff_t sst, size_t bsize, \
            size_t nblocks),                                                             \
           (dest, source, dst, sst, bsize, nblocks))
#define HP_C_CTX_SIGNAL(NAME, TYPE)                                                              \
  HP_C_CTX(void, NAME,                                                                           \
           (TYPE * dest, const TYPE* source, size_t nelems, uint64_t* sig_addr, uint64_t signal, \
            int sig_op),                                                                         \
           (dest, source, nelems, sig_addr, signal, sig_op))

#define HP_C_CTX_RMA(TYPE, NAME)                                     \
  HP_C_CTX_TRANSFER(void, NAME##_put, TYPE, TYPE)                    \
  HP_C_CTX_TRANSFER(void, NAME##_get, TYPE, TYPE)                    \
  HP_C_CTX_TRANSFER(void, NAME##_put_nbi, TYPE, TYPE)                \
  HP_C_CTX_TRANSFER(void, NAME##_get_nbi, TYPE, TYPE)                \
  HP_C_CTX(void, NAME##_p, (TYPE * dest, TYPE value), (dest, value)) \
  HP_C_CTX(TYPE, NAME##_g, (const TYPE* source), (source))           \
  HP_C_CTX_STRIDED(NAME##_iput, TYPE)                                \
  HP_C_CTX_STRIDED(NAME##_iget, TYPE)                                \
  HP_C_CTX_BLOCKED(NAME##_ibput, TYPE)                               \
  HP_C_CTX_BLOCKED(NAME##_ibget, TYPE)                               \
  HP_C_CTX_SIGNAL(NAME##_put_signal, TYPE)                           \
  HP_C_CTX_SIGNAL(NAME##_put_signal_nbi, TYPE)
HP_SHMEM_RMA_TYPES(HP_C_CTX_RMA)
HP_C_CTX(void, signal_add, (uint64_t * sig_addr, uint64_t signal), (sig_addr, signal))
HP_C_CTX(void, signal_set, (uint64_t * sig_addr, uint64_t signal), (sig_addr, signal))

// SIZE: 8, 16, 32, 64, 128 or mem (which has no strided forms).
#define HP_C_CTX_RMA_UNTYPED(SIZE)                     \
  HP_C_CTX_TRANSFER(void, put##SIZE, void, void)       \
  HP_C_CTX_TRANSFER(void, get##SIZE, void, void)       \
  HP_C_CTX_TRANSFER(void, put##SIZE##_nbi, void, void) \
  HP_C_CTX_TRANSFER(void, get##SIZE##_nbi, void, void) \
  HP_C_CTX_SIGNAL(put##SIZE##_signal, void)            \
  HP_C_CTX_SIGNAL(put##SIZE##_signal_nbi, void)
// clang-format off
#define HP_C_CTX_RMA_SIZE(SIZE)                                                 \
  HP_C_CTX_RMA_UNTYPED(SIZE)                                                    \
  HP_C_CTX_STRIDED(iput##SIZE, void) HP_C_CTX_STRIDED(iget##SIZE, void)         \
  HP_C_CTX_BLOCKED(ibput##SIZE, void) HP_C_CTX_BLOCKED(ibget##SIZE, void)
// clang-format on
HP_SHMEM_RMA_SIZES(HP_C_CTX_RMA_SIZE)
HP_C_CTX_RMA_UNTYPED(mem)

#define HP_C_CTX_AMO_EXTENDED(TYPE, NAME)                                                      \
  HP_C_CTX(TYPE, NAME##_atomic_fetch, (const TYPE* source), (source))                          \
  HP_C_CTX(void, NAME##_atomic_set, (TYPE * dest, TYPE value), (dest, value))                  \
  HP_C_CTX(TYPE, NAME##_atomic_swap, (TYPE * dest, TYPE value), (dest, value))                 \
  HP_C_CTX(void, NAME##_atomic_fetch_nbi, (TYPE * fetch, const TYPE* source), (fetch, source)) \
  HP_C_CTX(void, NAME##_atomic_swap_nbi, (TYPE * fetch, TYPE * dest, TYPE value),              \
           (fetch, dest, value))
#define HP_C_CTX_AMO_STANDARD(TYPE, NAME)                                                  \
  HP_C_CTX_AMO_EXTENDED(TYPE, NAME)                                                        \
  HP_C_CTX(TYPE, NAME##_atomic_compare_swap, (TYPE * dest, TYPE cond, TYPE value),         \
           (dest, cond, value))                                                            \
  HP_C_CTX(TYPE, NAME##_atomic_fetch_inc, (TYPE * dest), (dest))                           \
  HP_C_CTX(void, NAME##_atomic_inc, (TYPE * dest), (dest))                                 \
  HP_C_CTX(TYPE, NAME##_atomic_fetch_add, (TYPE * dest, TYPE value), (dest, value))        \
  HP_C_CTX(void, NAME##_atomic_add, (TYPE * dest, TYPE value), (dest, value))              \
  HP_C_CTX(void, NAME##_atomic_compare_swap_nbi,                                           \
           (TYPE * fetch, TYPE * dest, TYPE cond, TYPE value), (fetch, dest, cond, value)) \
  HP_C_CTX(void, NAME##_atomic_fetch_inc_nbi, (TYPE * fetch, TYPE * dest), (fetch, dest))  \
  HP_C_CTX(void, NAME##_atomic_fetch_add_nbi, (TYPE * fetch, TYPE * dest, TYPE value),     \
           (fetch, dest, value))
#define HP_C_CTX_BITWISE(TYPE, NAME, OP)                                                  \
  HP_C_CTX(TYPE, NAME##_atomic_fetch_##OP, (TYPE * dest, TYPE value), (dest, value))      \
  HP_C_CTX(void, NAME##_atomic_##OP, (TYPE * dest, TYPE value), (dest, value))            \
  HP_C_CTX(void, NAME##_atomic_fetch_##OP##_nbi, (TYPE * fetch, TYPE * dest, TYPE value), \
           (fetch, dest, value))
#define HP_C_CTX_AMO_BITWISE(TYPE, NAME) \
  HP_C_CTX_BITWISE(TYPE, NAME, and)      \
  HP_C_CTX_BITWISE(TYPE, NAME, or) HP_C_CTX_BITWISE(TYPE, NAME, xor)
HP_SHMEM_AMO_TYPES(HP_C_CTX_AMO_STANDARD)
HP_SHMEM_AMO_FLOAT_TYPES(HP_C_CTX_AMO_EXTENDED)
HP_SHMEM_AMO_BITWISE_TYPES(HP_C_CTX_AMO_BITWISE)

}  // extern "C"
