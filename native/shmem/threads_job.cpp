// run_threads: a job whose PEs are threads of this process (the threads transport). Every
// PE's segment is an anonymous mapping of this process, and the job segment is private; the
// same Context machinery as the shm transport runs on top.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/settings.h"
#include "shmem/context.h"
#include "shmem/segment_map.h"

namespace hp::shmem {
namespace {

// The root cause among the PEs' results: a body's error before any finalize's (a PE that
// finished its body and then waited in finalize's barrier only reports the others' trouble),
// and among those the first that is not PEER_DEAD (a consequence of another PE's abort).
Status root_cause(const std::vector<Status>& bodies, const std::vector<Status>& finals) {
  for (const auto* results : {&bodies, &finals}) {
    for (const Status& s : *results) {
      if (!s.is_ok() && s.code() != ErrorCode::kPeerDead) return s;
    }
    for (const Status& s : *results) {
      if (!s.is_ok()) return s;
    }
  }
  return Status::ok();
}

}  // namespace

Status run_threads(int n_pes, const std::function<Status()>& body, const ThreadsOptions& options) {
  HP_ENSURE(n_pes >= 1 && n_pes <= kMaxPes, ErrorCode::kInvalidArgument,
            "run_threads: n_pes={} must be in [1, {}]", n_pes, kMaxPes);
  HP_ENSURE(bool(body), ErrorCode::kInvalidArgument, "run_threads: the body is empty");
  HP_ENSURE(current() == nullptr, ErrorCode::kFailedPrecondition,
            "run_threads called from a thread that already is a PE");
  HP_RETURN_IF_ERROR(settings_status());
  const Settings& env = settings();
  const std::size_t heap = options.heap_bytes ? options.heap_bytes : env.shmem_heap_bytes;
  const double timeout = options.timeout_s > 0 ? options.timeout_s : env.shmem_timeout_s;
  const std::size_t segment_bytes = kControlBytes + (heap + 4095) / 4096 * 4096;

  std::unique_ptr<JobSegment> job;
  HP_RETURN_IF_ERROR(JobSegment::create_private(n_pes, &job));
  std::vector<std::byte*> segments(n_pes, nullptr);
  auto unmap = [&] {
    for (std::byte* s : segments) {
      if (s != nullptr) munmap(s, segment_bytes);
    }
  };
  for (int pe = 0; pe < n_pes; ++pe) {
    Status mapped = map_segment_aligned(-1, segment_bytes, kControlBytes, false, &segments[pe]);
    if (!mapped.is_ok()) {
      unmap();
      return mapped.with_context(fmt::format("run_threads: PE {}'s heap", pe));
    }
  }

  std::vector<Status> bodies(n_pes), finals(n_pes);
  std::vector<std::thread> threads;
  threads.reserve(n_pes);
  for (int pe = 0; pe < n_pes; ++pe) {
    threads.emplace_back([&, pe] {
      Context ctx;
      ctx.pe = pe;
      ctx.n_pes = n_pes;
      ctx.transport_kind = "threads";
      ctx.job = job.get();
      ctx.segments = segments;
      ctx.mapped_bytes.assign(n_pes, 0);  // run_threads unmaps
      ctx.segment_bytes = segment_bytes;
      ctx.allocator =
          std::make_unique<HeapAllocator>(ctx.heap_bytes(), heap_alignment(ctx.heap_bytes()));
      ctx.timeout_s = timeout;
      set_wait_policies(ctx, env, n_pes, /*shared=*/false);
      ctx.init_count = 1;
      ctx.init_world_team();
      ctx.init_shared_team();
      set_thread_context(&ctx);
      job->pe(pe).state.store(std::uint32_t(PeState::kReady), std::memory_order_release);
      Status s;
      try {
        s = body();
      } catch (const std::exception& e) {
        s = Status::error(ErrorCode::kInternal, "PE {} threw: {}", pe, e.what());
      }
      if (!s.is_ok()) job->abort(pe, s.to_string());
      bodies[pe] = s;
      finals[pe] = finalize_context(ctx);
      set_thread_context(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  unmap();
  return root_cause(bodies, finals);
}

}  // namespace hp::shmem
