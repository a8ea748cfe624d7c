// NodeWorker: the task runtime one level up (L3): one node of chips. docs/runtime.md, "Node
// level", describes the model; in short:
//
//   - N chip processes, each a ChipWorker (L2) with its own cores, forked by start() and joined
//     as the PEs of one symmetric memory job (shmem/node_job.h), so chip tasks may use hp::shmem
//     (put, signals, waits, collectives) among chips;
//   - host sub-workers: threads of this process that run host tasks (submit_sub);
//   - L3 tensors: symmetric allocations (alloc), one copy per chip at the same offset of every
//     chip's heap, mapped at the same address in every process of the node, so a task's tensor
//     arguments travel by address;
//   - run(orchestration): an L3 orchestration, with the L2 orchestrator's semantics
//     (orchestrator.h): dependencies inferred over the L3 tensors (RAW, WAW, WAR over overlapping
//     memory), scopes, rings with back-pressure and the deadlock error, observers and
//     diagnostics. A next-level task is a task of this level that completes when its chip
//     reports it done (deferred completion: it holds no core of this process meanwhile).
//
// Callables are identified by their handle (content-addressed SHA-256, callable.h), never by a
// chip's slot: register_callable() counts references per handle; each chip learns a callable
// the first time a task of it goes there (a library symbol is loaded there with RTLD_NOW and
// checked against the digest; a function callable must be registered before start(): the chip
// processes inherit it when they are forked, and cannot learn one registered later).
//
// Failure: a chip that dies or hangs is a named error on the parent (which chip, its pid, exit
// status or signal, and the task it ran) within the wait deadline, never a hang; the worker is
// then unusable (FAILED_PRECONDITION) and is closed like any other. close() (and the
// destructor) shuts every chip down within HP_WAIT_TIMEOUT_S, killing stragglers.
#ifndef HYPER_PARALLEL_RUNTIME_NODE_NODE_WORKER_H_
#define HYPER_PARALLEL_RUNTIME_NODE_NODE_WORKER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "common/api.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "platform/chip.h"
#include "runtime/callable.h"
#include "runtime/orchestrator.h"
#include "runtime/replay.h"
#include "runtime/task_args.h"
#include "runtime/task_types.h"

namespace hp::runtime {

class NodeWorker;

struct NodeWorkerConfig {
  int chips = 2;
  // Each chip's cores; `cpus` empty: the chip's share of this process's CPUs (as hprun --bind
  // splits them among ranks).
  platform::ChipConfig chip = {.num_cube = 1, .num_vector = 1};
  int sub_workers = 1;                   // host sub-worker threads (1 or 2)
  std::size_t heap_bytes = 64u << 20;    // each chip's symmetric heap
  std::size_t tensor_bytes = 32u << 20;  // of which L3 tensors (alloc) may take
  std::size_t scratch_bytes = 2u << 20;  // the collectives' scratch window, per chip
  std::size_t mailbox_bytes = 1u << 20;  // each direction of each chip's mailbox
  std::optional<double> wait_timeout_s;  // empty: HP_WAIT_TIMEOUT_S
  // How long start() waits for every chip to be ready. Separate from the waits' deadline: a
  // chip's start (on_chip_start loading weights, say) is not counted against any wait of a run.
  double start_timeout_s = 300;
  // Runs in each chip process after it joined the symmetric memory job and before it reports
  // ready (per-chip setup). An error fails start(), naming the chip.
  std::function<Status(int chip)> on_chip_start;
  // Around the fork of the chips (a language runtime's own fork protocol, e.g. Python's).
  std::function<void()> before_fork, after_fork_parent, after_fork_child;
};

// A symmetric L3 tensor: one copy per chip, at the same offset of every chip's heap.
struct HP_API SymmetricTensor {
  std::size_t offset = 0;
  DType dtype = DType::kFP32;
  std::vector<std::int64_t> shape;
  const NodeWorker* worker = nullptr;
  // Chip `chip`'s copy (valid in every process of the node).
  TensorView on(int chip) const;
  std::size_t bytes() const;
};

enum class CollectiveOp : int { kSum = 0, kMax = 1 };

// The L3 orchestration's view: what an orchestration function submits to.
class HP_API NodeOrchestrator {
 public:
  static constexpr int kAnyChip = -1;

  // A task of `handle`'s callable on chip `chip` (kAnyChip: the chip with the fewest tasks in
  // flight when it becomes ready), over config.block_num blocks of that chip. Its tensors must
  // lie in the node's shared memory (alloc); OUTPUT arguments are refused (give an alloc()ed
  // tensor as OUTPUT_EXISTING).
  Status submit_next_level(const CallableHandle& handle, const TaskArgs& args,
                           const CallConfig& config = {}, int chip = kAnyChip,
                           SubmitResult* result = nullptr);
  // A host task of `handle`'s callable on the sub-workers (threads of this process; any
  // memory). config.mode is ignored: sub-workers are one kind.
  Status submit_sub(const CallableHandle& handle, const TaskArgs& args,
                    const CallConfig& config = {}, SubmitResult* result = nullptr);
  Scope scope(ScopeSite site = std::source_location::current()) { return l3_.scope(site); }
  Status escape(const TensorView& output) { return l3_.escape(output); }

  // Collectives over every chip, as next-level tasks (one per chip) through the scratch window:
  // in place over `buffer` (allreduce, broadcast from `root`), or from `source` into `dest`
  // (allgather: dest holds chips x source; reduce_scatter: source holds chips x dest;
  // all_to_all: source and dest hold chips blocks, block j of chip i lands in block i of chip
  // j). Element types int32, int64, fp32, fp64 (bf16 for the copies).
  Status allreduce(const SymmetricTensor& buffer, CollectiveOp op = CollectiveOp::kSum);
  Status broadcast(const SymmetricTensor& buffer, int root);
  Status allgather(const SymmetricTensor& dest, const SymmetricTensor& source);
  Status reduce_scatter(const SymmetricTensor& dest, const SymmetricTensor& source,
                        CollectiveOp op = CollectiveOp::kSum);
  Status all_to_all(const SymmetricTensor& dest, const SymmetricTensor& source);

  int chips() const noexcept;
  Orchestrator& l3() noexcept { return l3_; }

 private:
  friend class NodeWorker;
  NodeOrchestrator(NodeWorker& worker, Orchestrator& l3) : worker_(worker), l3_(l3) {}
  Status collective(int kind, const SymmetricTensor& dest, const SymmetricTensor& source,
                    std::int64_t op_or_root);
  NodeWorker& worker_;
  Orchestrator& l3_;
};

using NodeOrchestration = std::function<Status(NodeOrchestrator& orchestrator)>;

struct NodeReplayBindings {
  std::map<std::string, CallableHandle> callables;
  std::vector<Rebase> buffers;
};

class HP_API NodeWorker {
 public:
  static Status create(const NodeWorkerConfig& config, std::unique_ptr<NodeWorker>* out);
  ~NodeWorker() noexcept;
  NodeWorker(const NodeWorker&) = delete;
  NodeWorker& operator=(const NodeWorker&) = delete;

  // The same handle registered again adds a reference. After start(), function callables are
  // FAILED_PRECONDITION (the chips were forked without them); library symbols are fine.
  Status register_callable(const Callable& callable, CallableHandle* handle);
  // Drops one reference; at zero the callable is forgotten (and each chip that knew it told).
  Status unregister_callable(const CallableHandle& handle);
  int callable_references(const CallableHandle& handle) const;

  // Forks the chips; each joins the symmetric memory job, creates its ChipWorker, runs
  // on_chip_start and reports ready. Returns once every chip is ready, or the first failure
  // (naming the chip), with every chip shut down. A chip is a copy of this process with only
  // the forking thread: start node workers before this process starts threads that may hold a
  // lock when it forks (a ThreadSanitizer build refuses to start threads in a child forked from
  // a process with several).
  Status start();
  bool started() const noexcept;
  // Shuts the chips down and reaps them (idempotent). The first problem is returned (a chip
  // that had to be killed, or had died).
  Status close();

  // A symmetric L3 tensor (zeroed). OUT_OF_MEMORY past tensor_bytes.
  Status alloc(DType dtype, std::span<const std::int64_t> shape, SymmetricTensor* out);
  Status alloc(DType dtype, std::initializer_list<std::int64_t> shape, SymmetricTensor* out) {
    return alloc(dtype, std::span<const std::int64_t>(shape.begin(), shape.size()), out);
  }
  Status free(const SymmetricTensor& tensor);

  // Replays a node-level deps.json (replay.h) recorded by a run of this worker's shape: each
  // next-level task again on the chip and with the launch shape it recorded, each sub task, in
  // their order and scopes, with the recorded edges and no inference. `bindings`: callable name
  // -> handle, and the recorded ranges -> memory standing for them (of alloc()ed tensors: the
  // chips see nothing else).
  Status replay(const std::string& deps_path, const NodeReplayBindings& bindings,
                const OrchestratorConfig& config = {});

  // Runs an L3 orchestration (after start()) and waits for every task it submitted. `config`:
  // the L3 level's rings, timeout, observers and diagnostics (each chip writes its own
  // diagnostics under <output_prefix>/chip<i>, the L3 level's under <output_prefix>).
  Status run(const NodeOrchestration& orchestration, const OrchestratorConfig& config = {});

  int chips() const noexcept;
  // Chip `chip`'s process id (0 before start()).
  int chip_pid(int chip) const noexcept;
  // The chip's heap (offset 0), valid in every process of the node.
  std::byte* chip_heap(int chip) const noexcept;

  struct Impl;

 private:
  friend class NodeOrchestrator;
  explicit NodeWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::runtime

#endif  // HYPER_PARALLEL_RUNTIME_NODE_NODE_WORKER_H_
