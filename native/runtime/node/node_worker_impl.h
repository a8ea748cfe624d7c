// The node worker's state (internal to the node runtime), shared by the parent side
// (node_worker.cpp: lifetime, callables, tensors, runs; dispatch.cpp: next-level tasks and the
// reply reader) and the chip side (chip_process.cpp, which runs in the forked chips on their
// copy of it).
//
// Memory shared with the chips (mapped before the fork, at the same address everywhere):
//   the NodeJob's segments  the chips' symmetric heaps; L3 tensors and the collectives' scratch
//                           window in their reserved part
//   mail_memory_            a NodeShared header, then one mailbox per chip
// Everything else is the parent's own; a chip reads its copy of it as it was at the fork
// (config, the function callables registered by then) and never writes it.
#ifndef HYPER_PARALLEL_RUNTIME_NODE_NODE_WORKER_IMPL_H_
#define HYPER_PARALLEL_RUNTIME_NODE_NODE_WORKER_IMPL_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "platform/wait.h"
#include "runtime/chip_worker.h"
#include "runtime/deferred_completion.h"
#include "runtime/node/mailbox.h"
#include "runtime/node/node_worker.h"
#include "shmem/node_job.h"

namespace hp::runtime {

// The shared header before the mailboxes.
struct alignas(64) NodeShared {
  platform::WaitWord reply_event;  // bumped by every chip's reply producers
};

struct NodeWorker::Impl {
  // --- fixed at create() ---
  NodeWorkerConfig config;
  double timeout_s = 60;
  int parent_pid = 0;

  // --- made by start(), before the fork ---
  std::unique_ptr<shmem::NodeJob> job;
  std::byte* mail_memory = nullptr;
  std::size_t mail_bytes = 0;
  NodeShared* shared = nullptr;
  std::vector<std::unique_ptr<node::Mailbox>> mailboxes;
  std::vector<platform::ChipConfig> chip_configs;
  std::vector<int> chip_mem_nodes;  // unused when empty
  // The collectives' scratch window: scratch_bytes of data then the signal words, per chip.
  std::size_t scratch_offset = 0;
  std::size_t scratch_total = 0;
  // The function callables the chips inherit (the registered ones at the fork), by digest.
  std::map<Sha256Digest, std::shared_ptr<const Callable>> inherited;

  // --- the parent ---
  struct Entry {
    std::shared_ptr<const Callable> callable;
    int references = 0;
    int proxy_slot = -1;      // on the host worker: dispatches next-level tasks to chips
    int sub_slot = -1;        // on the host worker: the callable itself, for sub tasks
    std::vector<char> known;  // per chip: a kRegister was sent
  };
  mutable std::mutex callables_mutex;
  std::map<Sha256Digest, Entry> callables;
  std::vector<std::pair<Sha256Digest, int>> builtins;  // collectives' handles, by kind

  std::unique_ptr<ChipWorker> host;  // the L3 orchestration's chip: dispatcher + sub-workers
  std::vector<int> pids;
  // Per chip: a pidfd (readable once the process has ended; -1: reaped at start, when it could
  // not be opened), and whether it has ended and waits for the reply reader to reap it (set by
  // the chip watcher once per chip, cleared by the reader as it reaps).
  std::vector<int> pidfds;
  std::unique_ptr<std::atomic<bool>[]> to_reap;
  bool started = false;
  bool closed = false;
  std::mutex run_mutex;  // one run() at a time; close() waits for it

  // Next-level tasks in flight, by key.
  struct InFlight {
    DeferredCompletion done;
    int chip = -1;
    std::string callable;
  };
  std::mutex flight_mutex;
  std::unordered_map<std::uint64_t, InFlight> in_flight;
  std::uint64_t next_key = 1;                 // under flight_mutex
  std::unique_ptr<std::atomic<int>[]> loads;  // tasks in flight per chip

  // Chip health and the reply reader.
  std::mutex health_mutex;
  std::condition_variable health_changed;  // a chip ended, or a session ended
  std::vector<int> wait_status;            // per chip: waitpid status, -1 while it runs
  std::vector<int> sessions_ended;         // per chip: kSessionEnded the parent asked for
  std::vector<Status> session_status;      // per chip: the last such session's status
  Status broken;                           // set when a chip died: the worker is unusable
  std::atomic<bool> closing{false};
  std::atomic<bool> stopping{false};
  std::thread reader;
  std::thread watcher;  // watch_chips(): ends once every watched chip's process has ended

  Status check_usable(std::string_view what);
  // Registers the entry's callable on the host worker: itself (for sub tasks) and its proxy
  // (for next-level tasks).
  Status register_on_host(const Sha256Digest& digest, Entry& entry);
  // The host slot of `handle`'s proxy (next-level tasks) or of its callable (sub tasks);
  // NOT_FOUND naming `what` when it is not registered.
  Status host_slot(const CallableHandle& handle, bool proxy, std::string_view what, int* slot);
  // The parent: writes a frame to chip `chip` (TIMEOUT, or PEER_DEAD when it died).
  Status send(int chip, std::uint32_t type, std::span<const std::byte> payload);
  // The proxy of a next-level task: picks its chip, makes sure the chip knows the callable,
  // sends the task and defers the task's completion to the chip's answer.
  Status dispatch(const Sha256Digest& digest, const TaskArgs& args);
  Status ensure_known(int chip, const Sha256Digest& digest);
  // The reply reader thread: answers, chip health.
  void read_replies() noexcept;
  // Completes what chip `chip`'s reply ring holds; true when it held anything.
  bool drain_replies(std::size_t chip, node::Frame& frame) noexcept;
  // Reaps the chips the watcher saw end, each after its last replies.
  void reap_chips(node::Frame& frame) noexcept;
  // The chip watcher thread: rings the reply bell as each chip's process ends.
  void watch_chips() noexcept;
  void chip_ended(int chip, int status);
  void fail_in_flight(int chip, const Status& why);
  // Ends each chip's session and begins `next` (diagnostics on or off); waits for the ends.
  Status cycle_sessions(const DiagnosticsConfig& next, const OrchestratorConfig& rings);
  std::string describe_chip(int chip) const;
};

// A chip process's life, after the fork: never returns (chip_process.cpp).
[[noreturn]] void run_chip_process(NodeWorker::Impl& impl, int chip) noexcept;

// The builtin collective kernels (collectives.cpp): registered by create().
Status register_collectives(NodeWorker& worker, std::vector<std::pair<Sha256Digest, int>>* out);
// The handle of the builtin collective kernel named `name` ("allreduce", ...); NOT_FOUND when
// no collective has that name.
Status collective_handle(const NodeWorker::Impl& impl, std::string_view name, CallableHandle* out);

// The hidden trailing scalars of a next-level task on the host worker: target chip, launch
// shape (mode | block_num << 8 | num_flags << 40), flag timeout (NaN: the chip's).
inline constexpr int kHiddenScalars = 3;
struct NextLevelShape {
  int chip = NodeOrchestrator::kAnyChip;
  CallConfig config;
};
// The three scalars' bits, and back.
std::array<std::uint64_t, kHiddenScalars> encode_next_level(const NextLevelShape& shape);
NextLevelShape decode_next_level(std::span<const std::uint64_t, kHiddenScalars> bits);

// The wait status of a chip that ended when its exit status could not be collected (no
// waitpid status has these bits).
inline constexpr int kWaitStatusCollectedElsewhere = std::numeric_limits<int>::min();
// waitpid status in words: "exited with status 3", "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_NODE_NODE_WORKER_IMPL_H_
