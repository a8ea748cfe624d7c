// init()/finalize() of a process PE: the shm transport under hprun, the MPI transport under
// mpirun (HP_SHMEM_TRANSPORT=mpi forces every PE through RMA), or a one-PE job.
//
// shm bootstrap: open the job segment hprun created; create this PE's segment
// "/hp.<job>.heap.<rank>" (zero-filled, bound to HP_MEM_NODES when set, pre-faulted); mark the
// slot kReady and count it in ready_count; wait until every PE is ready; map every other PE's
// segment; barrier; unlink this PE's name (everyone has it mapped, so no name outlives the job
// even if it crashes later).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/logging.h"
#include "common/settings.h"
#include "shmem/context.h"
#include "shmem/segment_map.h"

namespace hp::shmem {

extern Context* g_process_context;

namespace {

std::mutex g_init_mutex;

constexpr std::size_t kPage = 4096;

std::size_t segment_bytes_for(std::size_t heap_bytes) {
  return kControlBytes + (heap_bytes + kPage - 1) / kPage * kPage;
}

// Creates (or opens) and maps a PE's heap segment; a created one is bound to `mem_nodes`.
Status map_segment(const std::string& name, bool create, std::size_t bytes, std::byte** out,
                   std::span<const int> mem_nodes = {}) {
  const int fd = shm_open(name.c_str(), create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0)
    return JobSegment::object_error(
        create ? "cannot create heap segment" : "cannot open heap segment", name);
  if (create && ftruncate(fd, off_t(bytes)) != 0) {
    Status s =
        JobSegment::object_error("cannot size heap segment (is /dev/shm large enough?)", name);
    close(fd);
    return s;
  }
  struct stat st {};
  fstat(fd, &st);
  if (std::size_t(st.st_size) != bytes) {
    close(fd);
    return Status::error(ErrorCode::kInvalidArgument,
                         "heap segment '{}' has {} bytes where this PE expects {}: every PE of a "
                         "job must use the same HP_SHMEM_HEAP_SIZE (hprun --heap-size sets it)",
                         name, std::int64_t(st.st_size), bytes);
  }
  Status mapped = map_segment_aligned(fd, bytes, kControlBytes, /*reserve=*/create, out, mem_nodes);
  close(fd);
  if (mapped.code() == ErrorCode::kOutOfMemory) {
    return Status::error(ErrorCode::kOutOfMemory,
                         "heap segment '{}': {} (/dev/shm or the memory limit is smaller than the "
                         "heap: HP_SHMEM_HEAP_SIZE or hprun --heap-size sets it)",
                         name, mapped.message());
  }
  return mapped.with_context("heap segment '" + name + "'");
}

void unmap_all(Context& ctx) {
  for (int i = 0; i < ctx.n_pes; ++i) {
    if (ctx.mapped_bytes[i] != 0) munmap(ctx.segments[i], ctx.mapped_bytes[i]);
    ctx.segments[i] = nullptr;
    ctx.mapped_bytes[i] = 0;
  }
}

void fill_common(Context& ctx, int pe, int n, const Settings& env, bool shared,
                 std::size_t segment_bytes) {
  ctx.pe = pe;
  ctx.n_pes = n;
  ctx.segment_bytes = segment_bytes;
  ctx.segments.assign(n, nullptr);
  ctx.mapped_bytes.assign(n, 0);
  ctx.allocator =
      std::make_unique<HeapAllocator>(ctx.heap_bytes(), heap_alignment(ctx.heap_bytes()));
  ctx.timeout_s = env.shmem_timeout_s;
  set_wait_policies(ctx, env, n, shared);
  ctx.init_count = 1;
  ctx.init_world_team();
}

Status init_single(std::unique_ptr<Context>* out) {
  auto ctx = std::make_unique<Context>();
  HP_RETURN_IF_ERROR(JobSegment::create_private(1, &ctx->owned_job));
  ctx->job = ctx->owned_job.get();
  fill_common(*ctx, 0, 1, settings(), false, segment_bytes_for(settings().shmem_heap_bytes));
  ctx->transport_kind = "self";
  HP_RETURN_IF_ERROR(map_segment_aligned(-1, ctx->segment_bytes, kControlBytes, /*reserve=*/false,
                                         &ctx->segments[0], settings().mem_nodes));
  ctx->mapped_bytes[0] = ctx->segment_bytes;
  ctx->job->pe(0).state.store(std::uint32_t(PeState::kReady));
  *out = std::move(ctx);
  return Status::ok();
}

// The MPI plugin, next to this library (dlopen()ed with RTLD_GLOBAL: Open MPI's own components
// resolve libmpi's symbols globally).
Status load_mpi_plugin(MpiStartFn* start) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_mpi_plugin), &info) == 0 || info.dli_fname == nullptr) {
    return Status::error(ErrorCode::kInternal, "cannot find the shmem library's own path");
  }
  std::string path(info.dli_fname);
  path = path.substr(0, path.find_last_of('/') + 1) + kMpiPluginName;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  HP_ENSURE(handle != nullptr, ErrorCode::kUnsupported,
            "the MPI transport plugin did not load ({}); it needs Open MPI's libraries "
            "(apt-get install -y libopenmpi-dev openmpi-bin)",
            dlerror());
  *start = reinterpret_cast<MpiStartFn>(dlsym(handle, kMpiStartSymbol));
  HP_ENSURE(*start != nullptr, ErrorCode::kInternal, "{} has no {}", path, kMpiStartSymbol);
  return Status::ok();
}

// A PE of an MPI job: all_remote, every other PE through RMA; otherwise this host's PEs mapped.
Status init_mpi(const Settings& env, bool all_remote, std::unique_ptr<Context>* out) {
  MpiStartFn start = nullptr;
  HP_RETURN_IF_ERROR(load_mpi_plugin(&start));
  MpiStart job;
  const std::size_t segment_bytes = segment_bytes_for(env.shmem_heap_bytes);
  HP_RETURN_IF_ERROR(start(segment_bytes, kControlBytes, all_remote, env.shmem_timeout_s,
                           env.shmem_mpi_messages, &job)
                         .with_context("shmem init (mpi)"));
  auto ctx = std::make_unique<Context>();
  HP_RETURN_IF_ERROR(JobSegment::create_private(job.n_pes, &ctx->owned_job));
  ctx->job = ctx->owned_job.get();
  int local = 0;
  for (std::byte* s : job.segments) local += s != nullptr;
  fill_common(*ctx, job.pe, job.n_pes, env, false, segment_bytes);
  set_wait_policies(*ctx, env, local, false);
  ctx->segments = job.segments;  // MPI owns the memory: nothing to munmap
  ctx->transport = std::move(job.transport);
  ctx->transport_kind = all_remote ? "mpi" : "shm";
  ctx->job->pe(ctx->pe).state.store(std::uint32_t(PeState::kReady));
  HP_RETURN_IF_ERROR(barrier_on(*ctx, kTeamWorld).with_context("shmem init (mpi)"));
  *out = std::move(ctx);
  return Status::ok();
}

// Started by mpirun (Open MPI, or a PMI/PMIx launcher)?
bool under_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

Status init_shm(const Settings& env, std::unique_ptr<Context>* out) {
  HP_ENSURE(env.rank >= 0 && env.world_size >= 1 && env.rank < env.world_size,
            ErrorCode::kInvalidSetting,
            "HP_RANK={} and HP_WORLD_SIZE={} do not describe a PE of a job; start the program "
            "with hprun -n N",
            env.rank, env.world_size);
  auto ctx = std::make_unique<Context>();
  HP_RETURN_IF_ERROR(JobSegment::open(env.job_id, env.world_size, &ctx->owned_job));
  ctx->job = ctx->owned_job.get();
  fill_common(*ctx, env.rank, env.world_size, env, true, segment_bytes_for(env.shmem_heap_bytes));
  ctx->transport_kind = "shm";
  JobSegment& job = *ctx->job;
  PeSlot& slot = job.pe(ctx->pe);
  slot.pid.store(::getpid(), std::memory_order_relaxed);

  const std::string my_name = JobSegment::heap_name(env.job_id, ctx->pe);
  Status s = map_segment(my_name, true, ctx->segment_bytes, &ctx->segments[ctx->pe], env.mem_nodes);
  if (!s.is_ok()) {
    job.abort(ctx->pe, s.to_string());
    return s;
  }
  ctx->mapped_bytes[ctx->pe] = ctx->segment_bytes;
  slot.state.store(std::uint32_t(PeState::kReady), std::memory_order_release);
  platform::add_and_wake(job.header().ready_count, 1, true);

  // Wait for every PE's segment to exist.
  std::uint32_t ready = 0;
  const auto r = platform::wait_word(
      job.header().ready_count, [n = std::uint32_t(ctx->n_pes)](std::uint32_t v) { return v >= n; },
      platform::deadline_after(ctx->timeout_s), ctx->policy, [&job] { return job.aborted(); },
      &ready);
  if (r != platform::WaitResult::kReady) {
    shm_unlink(my_name.c_str());
    unmap_all(*ctx);
    if (r == platform::WaitResult::kCancelled) return ctx->aborted_status();
    return Status::error(ErrorCode::kTimeout,
                         "init on PE {}: only {} of {} PEs created their heap within {} s "
                         "(HP_SHMEM_TIMEOUT_S)",
                         ctx->pe, ready, ctx->n_pes, ctx->timeout_s);
  }
  for (int other = 0; other < ctx->n_pes && s.is_ok(); ++other) {
    if (other == ctx->pe) continue;
    s = map_segment(JobSegment::heap_name(env.job_id, other), false, ctx->segment_bytes,
                    &ctx->segments[other]);
    if (s.is_ok()) ctx->mapped_bytes[other] = ctx->segment_bytes;
  }
  if (s.is_ok()) s = barrier_on(*ctx, kTeamWorld);  // every PE mapped every segment
  shm_unlink(my_name.c_str());
  if (!s.is_ok()) {
    job.abort(ctx->pe, s.to_string());
    unmap_all(*ctx);
    return s.with_context("shmem init");
  }
  HP_LOG_DEBUG("shmem: PE {} of {} (job {}), heap {} bytes", ctx->pe, ctx->n_pes, env.job_id,
               ctx->heap_bytes());
  *out = std::move(ctx);
  return Status::ok();
}

}  // namespace

Status init_inherited(const InheritedPe& inherited) {
  std::lock_guard lock(g_init_mutex);
  HP_ENSURE(current() == nullptr, ErrorCode::kFailedPrecondition,
            "joining node job '{}' as PE {}: this process is a PE already", inherited.job->job_id(),
            inherited.pe);
  HP_RETURN_IF_ERROR(settings_status());
  const int n = inherited.job->n_pes();
  auto ctx = std::make_unique<Context>();
  ctx->job = inherited.job;
  fill_common(*ctx, inherited.pe, n, settings(), true, inherited.segment_bytes);
  ctx->timeout_s = inherited.timeout_s;
  ctx->transport_kind = "shm";
  ctx->segments = inherited.segments;  // the parent's mappings: nothing of ours to unmap
  if (inherited.reserved_bytes > 0) {
    std::size_t offset = 0;
    HP_RETURN_IF_ERROR(
        ctx->allocator->allocate(inherited.reserved_bytes, HeapAllocator::kMinAlignment, &offset));
    HP_ENSURE(offset == 0, ErrorCode::kInternal, "the reserved part starts at {}", offset);
  }
  PeSlot& slot = ctx->job->pe(ctx->pe);
  slot.pid.store(::getpid(), std::memory_order_relaxed);
  slot.state.store(std::uint32_t(PeState::kReady), std::memory_order_release);
  platform::add_and_wake(ctx->job->header().ready_count, 1, true);
  if (Status s = barrier_on(*ctx, kTeamWorld); !s.is_ok()) {
    ctx->job->abort(ctx->pe, s.to_string());
    return s.with_context(
        fmt::format("joining node job '{}' as PE {}", inherited.job->job_id(), inherited.pe));
  }
  ctx->init_shared_team();
  g_process_context = ctx.release();
  return Status::ok();
}

Status init() {
  std::lock_guard lock(g_init_mutex);
  if (Context* ctx = current()) {
    ++ctx->init_count;
    return Status::ok();
  }
  HP_RETURN_IF_ERROR(settings_status());
  const Settings& env = settings();
  std::unique_ptr<Context> ctx;
  switch (env.shmem_transport) {
    case ShmemTransport::kThreads:
      return Status::error(ErrorCode::kInvalidArgument,
                           "HP_SHMEM_TRANSPORT=threads: a threads job is started with "
                           "hp::shmem::run_threads, not init");
    case ShmemTransport::kMpi:
      HP_RETURN_IF_ERROR(init_mpi(env, /*all_remote=*/true, &ctx));
      break;
    case ShmemTransport::kShm:
      HP_ENSURE(!env.job_id.empty(), ErrorCode::kInvalidSetting,
                "HP_SHMEM_TRANSPORT=shm needs HP_JOB_ID: start the program with hprun -n N");
      HP_RETURN_IF_ERROR(init_shm(env, &ctx));
      break;
    case ShmemTransport::kAuto:
      if (!env.job_id.empty()) {
        HP_RETURN_IF_ERROR(init_shm(env, &ctx));
      } else if (under_mpi_launcher()) {
        HP_RETURN_IF_ERROR(init_mpi(env, /*all_remote=*/false, &ctx));
      } else {
        HP_RETURN_IF_ERROR(init_single(&ctx));
      }
      break;
  }
  ctx->init_shared_team();
  g_process_context = ctx.release();
  return Status::ok();
}

void global_exit(int status) noexcept {
  if (Context* ctx = current()) ctx->job->global_exit(ctx->pe, status);
  std::fflush(nullptr);
  std::_Exit(status);
}

Status finalize() {
  std::lock_guard lock(g_init_mutex);
  Context* ctx = current();
  HP_ENSURE(ctx != nullptr, ErrorCode::kFailedPrecondition, "finalize called before init");
  if (ctx->init_count > 1 || ctx != g_process_context) {
    // Matching an inner init, or a threads-job PE (run_threads finalizes it).
    if (ctx->init_count > 1) --ctx->init_count;
    return Status::ok();
  }
  Status status = finalize_context(*ctx);
  ctx->transport.reset();  // the MPI windows (and MPI, if this library initialized it)
  unmap_all(*ctx);
  g_process_context = nullptr;
  delete ctx;
  return status;
}

}  // namespace hp::shmem
