// The task runtime against oneTBB's flow graph, in the same run: per-task overhead (submit ->
// complete) of empty kernels over three DAGs of ~100 000 tasks:
//   chain    every task reads and writes one buffer (INOUT): each depends on the one before;
//   fan-out  stages of one source, `width` middles that read the source's buffer and each write
//            their own element, and a sink that reads all those elements; stage s+1's source
//            reads stage s's sink's buffer;
//   random   every task reads two random buffers of a pool of 64 and updates a third (INOUT).
// hp: Orchestrator::run submits the tasks with their tensor arguments (dependencies are
// inferred), in nested scopes (one per stage, or per `scope` tasks), on a chip of 1 cube + 1
// vector core (the tasks are single-block vector tasks). tbb: the same DAG built explicitly
// (one continue_node per task, make_edge per dependency, inferred beforehand by the same rules as
// the runtime's tensor map), then run to completion in an arena of as many threads as the
// process has CPUs; node construction is timed, destruction is not.
// Rounds alternate hp, tbb, hp, tbb ... per DAG; the report gives the medians and hp/tbb, and
// the median CPU time of hp's submitting (orchestration) thread per task, which a loaded
// machine disturbs less than wall time (time spent descheduled does not count).
// The first (untimed) hp run of each DAG is checked: every dependency it inferred is one of the
// expected ones, and every expected dependency's predecessor finished before its successor
// started.
// --explicit-deps: hp gets what TBB gets, the DAG's edges (TaskArgs::set_dependencies with the
// predecessors' task ids, no tensor arguments): the runtime's cost without dependency inference.
#include <pthread.h>
#include <sched.h>
#include <tbb/flow_graph.h>
#include <tbb/task_arena.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "runtime/orchestrator.h"

using hp::DType;
using hp::Status;
using hp::TensorView;
using namespace hp::runtime;

namespace {

void check(const Status& s, const char* what) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

struct Access {
  int buffer;  // index into Dag::buffers
  int lo;      // first element
  int count;   // elements
  ArgTag tag;
};

struct Dag {
  std::string name;
  std::vector<std::vector<Access>> tasks;
  std::vector<int> scope_starts;  // nested scopes: each runs from one start to the next (first: 0)
  std::vector<std::vector<std::int32_t>> buffers;
  std::vector<std::vector<int>> preds;  // expected dependencies of each task (deduplicated)
};

// The runtime's rules (tensor_map.h) over element ranges of whole buffers: INPUT depends on
// overlapping writes, INOUT and OUTPUT_EXISTING on overlapping writes and reads; a write drops
// the older entries it covers.
void infer_dependencies(Dag& dag) {
  struct Entry {
    int lo, hi, task;
    bool write;
  };
  std::vector<std::vector<Entry>> entries(dag.buffers.size());
  dag.preds.assign(dag.tasks.size(), {});
  for (std::size_t t = 0; t < dag.tasks.size(); ++t) {
    std::vector<int>& preds = dag.preds[t];
    for (const Access& a : dag.tasks[t]) {
      const int lo = a.lo, hi = a.lo + a.count;
      for (const Entry& e : entries[static_cast<std::size_t>(a.buffer)]) {
        if (e.hi <= lo || hi <= e.lo) continue;
        if (a.tag == ArgTag::kInput && !e.write) continue;
        preds.push_back(e.task);
      }
    }
    for (const Access& a : dag.tasks[t]) {
      const int lo = a.lo, hi = a.lo + a.count;
      const bool write = a.tag != ArgTag::kInput;
      auto& list = entries[static_cast<std::size_t>(a.buffer)];
      if (write) {
        std::erase_if(list, [&](const Entry& e) {
          return e.task != static_cast<int>(t) && lo <= e.lo && e.hi <= hi;
        });
      }
      list.push_back({lo, hi, static_cast<int>(t), write});
    }
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  }
}

Dag make_chain(int tasks, int scope) {
  Dag dag{.name = "chain"};
  dag.buffers.assign(1, std::vector<std::int32_t>(16));
  for (int t = 0; t < tasks; ++t) {
    if (t % scope == 0) dag.scope_starts.push_back(t);
    dag.tasks.push_back({{0, 0, 1, ArgTag::kInOut}});
  }
  return dag;
}

Dag make_fan_out(int tasks, int width) {
  Dag dag{.name = "fan-out/fan-in (width " + std::to_string(width) + ")"};
  const int stages = std::max(1, tasks / (width + 2));
  for (int s = 0; s < stages; ++s) {
    const int x = static_cast<int>(dag.buffers.size());
    dag.buffers.emplace_back(16);                                    // x: the source's output
    dag.buffers.emplace_back(static_cast<std::size_t>(width) + 16);  // y: one element per middle
    dag.buffers.emplace_back(16);                                    // z: the sink's output
    const int y = x + 1, z = x + 2;
    dag.scope_starts.push_back(static_cast<int>(dag.tasks.size()));
    std::vector<Access> source;
    if (s > 0) source.push_back({x - 1, 0, 1, ArgTag::kInput});
    source.push_back({x, 0, 1, ArgTag::kOutputExisting});
    dag.tasks.push_back(source);
    for (int j = 0; j < width; ++j) {
      dag.tasks.push_back({{x, 0, 1, ArgTag::kInput}, {y, j, 1, ArgTag::kOutputExisting}});
    }
    dag.tasks.push_back({{y, 0, width, ArgTag::kInput}, {z, 0, 1, ArgTag::kOutputExisting}});
  }
  return dag;
}

Dag make_random(int tasks, int scope, int pool) {
  Dag dag{.name = "random (pool " + std::to_string(pool) + ", 2 in + 1 inout)"};
  dag.buffers.assign(static_cast<std::size_t>(pool), std::vector<std::int32_t>(16));
  std::mt19937_64 rng(20261129);
  std::uniform_int_distribution<int> pick(0, pool - 1);
  for (int t = 0; t < tasks; ++t) {
    if (t % scope == 0) dag.scope_starts.push_back(t);
    int a = pick(rng), b = pick(rng), c = pick(rng);
    while (b == a) b = pick(rng);
    while (c == a || c == b) c = pick(rng);
    dag.tasks.push_back(
        {{a, 0, 1, ArgTag::kInput}, {b, 0, 1, ArgTag::kInput}, {c, 0, 1, ArgTag::kInOut}});
  }
  return dag;
}

TensorView view_of(Dag& dag, const Access& a) {
  return TensorView(dag.buffers[static_cast<std::size_t>(a.buffer)].data() + a.lo, DType::kInt32,
                    {a.count});
}

// Records what the first run inferred and the order tasks ran in.
struct OrderCheck : Observer {
  explicit OrderCheck(std::size_t tasks)
      : started(tasks, -1), completed(tasks, -1), inferred(tasks) {}
  void on_task_submit(const TaskInfo& t, std::span<const Dependency> deps,
                      const Occupancy&) override {
    for (const Dependency& d : deps) inferred[t.id].push_back(static_cast<int>(d.pred));
  }
  void on_task_start(const TaskInfo& t, int) override { started[t.id] = clock.fetch_add(1); }
  void on_task_complete(const TaskInfo& t, const Status&) override {
    completed[t.id] = clock.fetch_add(1);
  }
  std::atomic<std::int64_t> clock{0};
  std::vector<std::int64_t> started, completed;
  std::vector<std::vector<int>> inferred;
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The CPUs this process may run on.
cpu_set_t process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) CPU_SET(0, &set);
  return set;
}

int cpus_of_process() {
  const cpu_set_t set = process_cpus();
  return CPU_COUNT(&set);
}

// The first two CPUs of the process (the measurement pins one thread to each); -1 for a
// missing one.
std::pair<int, int> two_cpus() {
  const cpu_set_t set = process_cpus();
  int found[2] = {-1, -1}, n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; ++c) {
    if (CPU_ISSET(c, &set)) found[n++] = c;
  }
  return {found[0], found[1]};
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

class HpRunner {
 public:
  // orchestrator_cpu >= 0: the orchestration thread runs pinned to that CPU. explicit_deps: tasks
  // name their predecessors instead of carrying tensor arguments.
  HpRunner(int orchestrator_cpu, bool explicit_deps)
      : orchestrator_cpu_(orchestrator_cpu), explicit_deps_(explicit_deps) {
    check(ChipWorker::create({.num_cube = 1, .num_vector = 1}, &worker_), "ChipWorker::create");
    check(
        worker_->register_callable(
            Callable::from_function(
                "empty", [](const TaskArgs&, hp::platform::BlockContext&) { return Status::ok(); },
                "bench-runtime-empty-v1"),
            &empty_),
        "register_callable");
  }

  // Returns the orchestration thread's CPU time (s) for the submits: what the runtime costs the
  // submitting thread, robust to a loaded machine (time descheduled does not count).
  double run(Dag& dag, Observer* observer) {
    double orchestration_cpu = 0;
    OrchestratorConfig config;
    if (observer != nullptr) config.observers = {observer};
    std::size_t widest = 0;
    for (std::size_t i = 0; i < dag.scope_starts.size(); ++i) {
      const std::size_t end = i + 1 < dag.scope_starts.size()
                                  ? static_cast<std::size_t>(dag.scope_starts[i + 1])
                                  : dag.tasks.size();
      widest = std::max(widest, end - static_cast<std::size_t>(dag.scope_starts[i]));
    }
    config.task_ring_slots = std::max<int>(1024, static_cast<int>(widest) + 1);
    std::vector<TaskId> ids;
    check(Orchestrator::run(
              *worker_,
              [&](Orchestrator& o) -> Status {
                if (orchestrator_cpu_ >= 0) pin_to(orchestrator_cpu_);
                const double cpu_start = thread_cpu_seconds();
                for (std::size_t i = 0; i < dag.scope_starts.size(); ++i) {
                  const auto begin = static_cast<std::size_t>(dag.scope_starts[i]);
                  const std::size_t end = i + 1 < dag.scope_starts.size()
                                              ? static_cast<std::size_t>(dag.scope_starts[i + 1])
                                              : dag.tasks.size();
                  auto scope = o.scope();
                  for (std::size_t t = begin; t < end; ++t) {
                    TaskArgs args;
                    if (explicit_deps_) {
                      ids.assign(dag.preds[t].begin(), dag.preds[t].end());
                      args.set_dependencies(ids);
                    } else {
                      for (const Access& a : dag.tasks[t]) {
                        switch (a.tag) {
                          case ArgTag::kInput:
                            args.input(view_of(dag, a));
                            break;
                          case ArgTag::kInOut:
                            args.inout(view_of(dag, a));
                            break;
                          default:
                            args.output_existing(view_of(dag, a));
                            break;
                        }
                      }
                    }
                    HP_RETURN_IF_ERROR(o.submit(empty_, args));
                  }
                }
                orchestration_cpu = thread_cpu_seconds() - cpu_start;
                return Status::ok();
              },
              config),
          "Orchestrator::run");
    return orchestration_cpu;
  }

 private:
  std::unique_ptr<ChipWorker> worker_;
  int empty_ = -1;
  int orchestrator_cpu_ = -1;
  bool explicit_deps_ = false;
};

// The graph outlives its nodes (members are destroyed in reverse order).
struct TbbGraph {
  using Node = tbb::flow::continue_node<tbb::flow::continue_msg>;
  tbb::flow::graph graph;
  std::vector<std::unique_ptr<Node>> nodes;
};

// Builds and runs the DAG; the caller destroys the graph (untimed).
std::unique_ptr<TbbGraph> run_tbb(tbb::task_arena& arena, const Dag& dag) {
  using Node = TbbGraph::Node;
  auto built = std::make_unique<TbbGraph>();
  tbb::flow::graph& graph = built->graph;
  std::vector<std::unique_ptr<Node>>& nodes = built->nodes;
  arena.execute([&] {
    nodes.reserve(dag.tasks.size());
    for (std::size_t t = 0; t < dag.tasks.size(); ++t) {
      nodes.push_back(std::make_unique<Node>(graph, [](const tbb::flow::continue_msg&) {}));
      for (int p : dag.preds[t])
        tbb::flow::make_edge(*nodes[static_cast<std::size_t>(p)], *nodes[t]);
    }
    for (std::size_t t = 0; t < dag.tasks.size(); ++t) {
      if (dag.preds[t].empty()) nodes[t]->try_put(tbb::flow::continue_msg());
    }
    graph.wait_for_all();
  });
  return built;
}

void verify(HpRunner& hp, Dag& dag) {
  OrderCheck order(dag.tasks.size());
  hp.run(dag, &order);
  std::size_t edges = 0;
  for (std::size_t t = 0; t < dag.tasks.size(); ++t) {
    for (int p : order.inferred[t]) {
      if (!std::binary_search(dag.preds[t].begin(), dag.preds[t].end(), p)) {
        std::fprintf(stderr, "%s: task %zu: unexpected dependency on task %d\n", dag.name.c_str(),
                     t, p);
        std::exit(1);
      }
    }
    for (int p : dag.preds[t]) {
      ++edges;
      if (order.completed[static_cast<std::size_t>(p)] > order.started[t] || order.started[t] < 0) {
        std::fprintf(stderr, "%s: task %zu started before its predecessor %d completed\n",
                     dag.name.c_str(), t, p);
        std::exit(1);
      }
    }
  }
  std::printf("  %-40s %zu tasks, %zu dependencies: order checked\n", dag.name.c_str(),
              dag.tasks.size(), edges);
}

// Two threads passing a counter back and forth through one cache line, spinning: the one-way
// hand-off time between CPUs, which the host varies over time (its placement of the vCPUs) and
// which every task pays a few of in hp (submitted on one thread, run on another). Printed with
// the results so that runs can be compared. handoff_ns needs 2 CPUs (0 when the process has one).
double handoff_once(int cpu_a, int cpu_b) {
  constexpr std::uint32_t kTrips = 20000;
  alignas(64) std::atomic<std::uint32_t> word{0};
  auto player = [&](std::uint32_t parity) {
    for (std::uint32_t v = parity; v < 2 * kTrips; v += 2) {
      for (int spins = 0; word.load(std::memory_order_acquire) != v; ++spins) {
        if (spins > 100000) sched_yield();  // the other thread was descheduled
      }
      word.store(v + 1, std::memory_order_release);
    }
  };
  const auto start = std::chrono::steady_clock::now();
  // On two CPUs, each thread pinned (std::thread inherits the caller's mask: restored after).
  cpu_set_t saved;
  pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
  std::thread other([&] {
    pin_to(cpu_b);
    player(1u);
  });
  pin_to(cpu_a);
  player(0);
  other.join();
  pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
             .count() /
         (2.0 * kTrips);
}

double handoff_ns() {  // the median of 5
  const auto [cpu_a, cpu_b] = two_cpus();
  if (cpu_b < 0) return 0;
  std::vector<double> samples;
  for (int i = 0; i < 5; ++i) samples.push_back(handoff_once(cpu_a, cpu_b));
  return hp::bench::median(samples);
}

struct BenchOptions {
  int tasks = 100000;
  int rounds = 7;
  int width = 1000;
  int scope = 512;
  bool peer = true;  // --no-peer: only the runtime (for profiling it)
  std::string only;  // --only=chain|fan-out|random: that DAG alone (for profiling it)
  // --orchestrator-cpu=N: pins hp's orchestration thread (with HP_PIN_THREADS=on pinning core c
  // to the c-th CPU, this chooses whether it shares a CPU with the vector core)
  int orchestrator_cpu = -1;
  bool explicit_deps = false;  // --explicit-deps: hp is given the DAG's edges, as TBB is
};

BenchOptions parse(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (arg == "--quick") {
      o.tasks = 3000;
      o.rounds = 1;
      o.width = 100;
    } else if (arg == "--no-peer") {
      o.peer = false;
    } else if (arg == "--explicit-deps") {
      o.explicit_deps = true;
    } else if (const char* v = value("--only")) {
      o.only = v;
      if (o.only != "chain" && o.only != "fan-out" && o.only != "random") {
        std::fprintf(stderr, "bench_runtime: --only takes chain, fan-out or random\n");
        std::exit(2);
      }
    } else if (const char* v = value("--tasks")) {
      o.tasks = std::atoi(v);
    } else if (const char* v = value("--rounds")) {
      o.rounds = std::atoi(v);
    } else if (const char* v = value("--width")) {
      o.width = std::atoi(v);
    } else if (const char* v = value("--scope")) {
      o.scope = std::atoi(v);
    } else if (const char* v = value("--orchestrator-cpu")) {
      char* end = nullptr;
      const long cpu = std::strtol(v, &end, 10);
      const cpu_set_t set = process_cpus();
      if (end == v || *end != '\0' || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)) {
        std::fprintf(stderr,
                     "bench_runtime: --orchestrator-cpu=%s is not a CPU this process may run on\n",
                     v);
        std::exit(2);
      }
      o.orchestrator_cpu = static_cast<int>(cpu);
    } else {
      std::fprintf(stderr,
                   "usage: bench_runtime [--quick] [--tasks=N] [--rounds=R] [--width=W] "
                   "[--scope=S] [--no-peer]\n"
                   "                     [--only=chain|fan-out|random] [--orchestrator-cpu=N] "
                   "[--explicit-deps]\n");
      std::exit(2);
    }
  }
  if (o.tasks < 1 || o.rounds < 1 || o.width < 1 || o.scope < 1) {
    std::fprintf(stderr, "bench_runtime: every option must be >= 1\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const BenchOptions options = parse(argc, argv);
  const int threads = cpus_of_process();
  std::printf(
      "runtime benchmarks: per-task overhead of empty tasks, medians of %d interleaved "
      "rounds\n  hp: Orchestrator on a chip of 1 cube + 1 vector core, %s; tbb: flow graph "
      "(continue_node + make_edge) in a %d-thread arena\n",
      options.rounds,
      options.explicit_deps ? "dependencies given (set_dependencies)"
                            : "dependencies inferred from tensor arguments",
      threads);
  std::printf(
      "  cache line hand-off between two threads: %.0f ns one way (this host varies it over "
      "time)\n",
      handoff_ns());
  std::vector<Dag> dags;
  if (options.only.empty() || options.only == "chain") {
    dags.push_back(make_chain(options.tasks, options.scope));
  }
  if (options.only.empty() || options.only == "fan-out") {
    dags.push_back(make_fan_out(options.tasks, options.width));
  }
  if (options.only.empty() || options.only == "random") {
    dags.push_back(make_random(options.tasks, options.scope, 64));
  }
  HpRunner hp(options.orchestrator_cpu, options.explicit_deps);
  tbb::task_arena arena(threads);
  for (Dag& dag : dags) {
    infer_dependencies(dag);
    verify(hp, dag);
  }
  for (Dag& dag : dags) {
    if (options.peer) run_tbb(arena, dag);  // warm up
    const double n = static_cast<double>(dag.tasks.size());
    std::vector<double> ours, peer, submit_cpu;
    for (int r = 0; r < options.rounds; ++r) {
      auto start = std::chrono::steady_clock::now();
      submit_cpu.push_back(hp.run(dag, nullptr) / n);
      ours.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n);
      if (!options.peer) continue;
      start = std::chrono::steady_clock::now();
      std::unique_ptr<TbbGraph> graph = run_tbb(arena, dag);
      peer.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n);
      graph.reset();
    }
    const double cpu = hp::bench::median(submit_cpu) * 1e9;
    if (!options.peer) {
      std::printf("%-42s hp: %8.1f ns/task   (submitting thread's CPU: %6.1f ns/task)\n",
                  dag.name.c_str(), hp::bench::median(ours) * 1e9, cpu);
      continue;
    }
    const double a = hp::bench::median(ours), b = hp::bench::median(peer);
    std::printf(
        "%-42s hp: %8.1f ns/task   tbb::flow: %8.1f ns/task   hp/tbb: %5.2f   "
        "(submitting thread's CPU: %6.1f ns/task)\n",
        dag.name.c_str(), a * 1e9, b * 1e9, a / b, cpu);
    std::fflush(stdout);
  }
  return 0;
}
