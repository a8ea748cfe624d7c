// The runtime's node level (NodeWorker, L3) against a process pool, in the same run:
//   task     the per-task overhead of next-level tasks: `tasks` empty single-block tasks with no
//            arguments, submitted to 1, 2 and 4 chips in turn (chip = task % chips), from
//            submit to the parent seeing every completion; ns per task = the run's time / tasks.
//            Peer: the same tasks on a pool of as many worker processes, each fed through a
//            shared-memory ring of task records (id, function) with a ring of completions back,
//            the parent keeping at most `window` in flight per worker: what a careful user
//            writes with shared memory and futexes, and what the node runtime's mailboxes do
//            with no runtime around them.
//   run      the fixed cost of one NodeWorker::run: an empty orchestration, and one with a
//            single next-level task (a round trip to a chip); peer: the same round trip on the
//            pool.
//   floor    the bare cross-process round trip on this host: two processes handing one word
//            back and forth through shared memory with the same waits (yield, then futex).
// Rounds alternate hp and peer; the report gives medians and ratios. --quick (the smoke ctest)
// shrinks everything.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common/compare.h"
#include "platform/wait.h"
#include "runtime/node/node_worker.h"

using hp::Status;
using namespace hp::runtime;
using Clock = std::chrono::steady_clock;

namespace {

void check(const Status& s, const char* what) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The waits of processes that share CPUs: no spin, a short yield, then the futex.
hp::platform::WaitPolicy process_policy() {
  return {.spin = 0, .yield_for = std::chrono::microseconds(50), .process_shared = true};
}

// --- the peer: a process pool on shared-memory rings --------------------------------------------

constexpr int kRingSlots = 1024;

struct alignas(64) PoolRing {
  alignas(64) std::atomic<std::uint64_t> head{0};
  alignas(64) std::atomic<std::uint64_t> tail{0};
  alignas(64) hp::platform::WaitWord data;   // bumped per push
  alignas(64) hp::platform::WaitWord space;  // bumped per pop
  std::uint64_t records[kRingSlots][2];      // task id, function
};

struct alignas(64) PoolWorker {
  PoolRing tasks;
  PoolRing done;
  std::atomic<std::uint32_t> stop{0};
};

void push(PoolRing& r, std::uint64_t id, std::uint64_t fn) {
  const std::uint64_t h = r.head.load(std::memory_order_relaxed);
  hp::platform::wait_event(
      r.space, [&] { return h - r.tail.load(std::memory_order_acquire) < kRingSlots; },
      Clock::time_point::max(), process_policy(), nullptr);
  r.records[h % kRingSlots][0] = id;
  r.records[h % kRingSlots][1] = fn;
  r.head.store(h + 1, std::memory_order_release);
  hp::platform::notify_event(r.data, true);
}

bool pop(PoolRing& r, std::uint64_t* id, const std::atomic<std::uint32_t>* stop) {
  const std::uint64_t t = r.tail.load(std::memory_order_relaxed);
  hp::platform::wait_event(
      r.data,
      [&] {
        return r.head.load(std::memory_order_acquire) != t ||
               (stop != nullptr && stop->load(std::memory_order_acquire) != 0);
      },
      Clock::time_point::max(), process_policy(), nullptr);
  if (r.head.load(std::memory_order_acquire) == t) return false;
  *id = r.records[t % kRingSlots][0];
  r.tail.store(t + 1, std::memory_order_release);
  hp::platform::notify_event(r.space, true);
  return true;
}

void empty_function() { asm volatile("" ::: "memory"); }

class Pool {
 public:
  explicit Pool(int workers) : n_(workers) {
    bytes_ = sizeof(PoolWorker) * std::size_t(n_);
    void* m = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) std::exit(1);
    workers_ = static_cast<PoolWorker*>(m);
    for (int w = 0; w < n_; ++w) new (&workers_[w]) PoolWorker();
    for (int w = 0; w < n_; ++w) {
      const pid_t pid = fork();
      if (pid == 0) {
        PoolWorker& me = workers_[w];
        std::uint64_t id = 0;
        while (pop(me.tasks, &id, &me.stop)) {
          empty_function();
          push(me.done, id, 0);
        }
        _exit(0);
      }
      pids_.push_back(pid);
    }
  }
  ~Pool() {
    for (int w = 0; w < n_; ++w) {
      workers_[w].stop.store(1, std::memory_order_release);
      hp::platform::notify_event(workers_[w].tasks.data, true);
    }
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
    munmap(workers_, bytes_);
  }
  // `tasks` tasks, task i to worker i % n, at most `window` in flight per worker.
  void run(std::int64_t tasks, int window) {
    std::vector<std::int64_t> in_flight(std::size_t(n_), 0);
    std::int64_t sent = 0, done = 0;
    std::uint64_t id = 0;
    while (done < tasks) {
      while (sent < tasks && in_flight[std::size_t(sent % n_)] < window) {
        push(workers_[sent % n_].tasks, std::uint64_t(sent), 0);
        ++in_flight[std::size_t(sent % n_)];
        ++sent;
      }
      bool got = false;
      for (int w = 0; w < n_; ++w) {  // drain what came back
        PoolRing& r = workers_[w].done;
        while (r.head.load(std::memory_order_acquire) != r.tail.load(std::memory_order_relaxed)) {
          pop(r, &id, nullptr);
          --in_flight[std::size_t(w)];
          ++done;
          got = true;
        }
      }
      if (!got && done < tasks) {  // nothing yet: wait on a worker that has tasks
        int w = 0;
        while (in_flight[std::size_t(w)] == 0) ++w;
        if (pop(workers_[w].done, &id, nullptr)) {
          --in_flight[std::size_t(w)];
          ++done;
        }
      }
    }
  }

 private:
  int n_;
  std::size_t bytes_ = 0;
  PoolWorker* workers_ = nullptr;
  std::vector<pid_t> pids_;
};

// --- the floor: one word bounced between two processes -----------------------------------------

double round_trip_seconds(int trips) {
  auto* words = static_cast<hp::platform::WaitWord*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (&words[0]) hp::platform::WaitWord();
  const pid_t pid = fork();
  auto await = [&](std::uint32_t target) {
    std::uint32_t last = 0;
    hp::platform::wait_word(
        words[0], [&](std::uint32_t v) { return v >= target; }, Clock::time_point::max(),
        process_policy(), nullptr, &last);
  };
  if (pid == 0) {
    for (int i = 0; i < trips; ++i) {
      await(std::uint32_t(2 * i + 1));
      hp::platform::add_and_wake(words[0], 1, true);
    }
    _exit(0);
  }
  const auto start = Clock::now();
  for (int i = 0; i < trips; ++i) {
    hp::platform::add_and_wake(words[0], 1, true);
    await(std::uint32_t(2 * i + 2));
  }
  const double s = seconds_since(start) / trips;
  waitpid(pid, nullptr, 0);
  munmap(words, 4096);
  return s;
}

// --- hp ---------------------------------------------------------------------------------------

struct Node {
  std::unique_ptr<NodeWorker> worker;
  CallableHandle empty;
};

Node start_node(int chips) {
  Node n;
  NodeWorkerConfig config;
  config.chips = chips;
  config.heap_bytes = 8 << 20;
  config.tensor_bytes = 2 << 20;
  config.scratch_bytes = 64 << 10;
  check(NodeWorker::create(config, &n.worker), "NodeWorker::create");
  check(n.worker->register_callable(
            Callable::from_function(
                "empty", [](const TaskArgs&, hp::platform::BlockContext&) { return Status::ok(); },
                "bench.empty.v1"),
            &n.empty),
        "register");
  check(n.worker->start(), "NodeWorker::start");
  return n;
}

constexpr std::int64_t kScopeTasks = 256;

double hp_tasks_seconds(Node& n, std::int64_t tasks) {
  const int chips = n.worker->chips();
  const auto start = Clock::now();
  check(n.worker->run([&](NodeOrchestrator& o) -> Status {
    for (std::int64_t i = 0; i < tasks; i += kScopeTasks) {
      auto scope = o.scope();  // its tasks retire once done: the rings recycle
      for (std::int64_t j = i; j < std::min(tasks, i + kScopeTasks); ++j) {
        HP_RETURN_IF_ERROR(o.submit_next_level(n.empty, TaskArgs(), {}, int(j % chips)));
      }
    }
    return Status::ok();
  }),
        "run");
  return seconds_since(start) / double(tasks);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::int64_t tasks = 20000;
  int rounds = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    if (a.rfind("--tasks=", 0) == 0) tasks = std::atoll(a.c_str() + 8);
    if (a.rfind("--rounds=", 0) == 0) rounds = std::atoi(a.c_str() + 9);
  }
  if (quick) {
    tasks = 200;
    rounds = 1;
  }
  const int window = 256;
  std::printf("node runtime: %lld empty next-level tasks per sample, %d rounds (medians)\n",
              static_cast<long long>(tasks), rounds);
  std::vector<double> floor;
  for (int r = 0; r < rounds; ++r) floor.push_back(round_trip_seconds(quick ? 100 : 20000));
  const double floor_s = hp::bench::median(floor);
  std::printf("%-34s %9.2f us\n", "floor: cross-process round trip", floor_s * 1e6);

  for (int chips : {1, 2, 4}) {
    Node node = start_node(chips);
    Pool pool(chips);
    hp_tasks_seconds(node, tasks / 10 + 1);  // warm both
    pool.run(tasks / 10 + 1, window);
    std::vector<double> hp_s, peer_s;
    for (int r = 0; r < rounds; ++r) {
      hp_s.push_back(hp_tasks_seconds(node, tasks));
      const auto start = Clock::now();
      pool.run(tasks, window);
      peer_s.push_back(seconds_since(start) / double(tasks));
    }
    const double h = hp::bench::median(hp_s), p = hp::bench::median(peer_s);
    std::printf(
        "task, %d chip%s %-20s hp: %7.2f us  pool: %7.2f us  hp/pool: %5.2f  "
        "hp/floor: %5.2f\n",
        chips, chips == 1 ? " " : "s", "", h * 1e6, p * 1e6, h / p, h / floor_s);
    std::fflush(stdout);

    if (chips == 2) {
      // The fixed cost of a run: empty, and with one next-level task.
      const int runs = quick ? 5 : 2000;
      std::vector<double> empty_s, one_s, pool_one_s;
      for (int r = 0; r < rounds; ++r) {
        auto start = Clock::now();
        for (int i = 0; i < runs; ++i) {
          check(node.worker->run([](NodeOrchestrator&) { return Status::ok(); }), "run");
        }
        empty_s.push_back(seconds_since(start) / runs);
        start = Clock::now();
        for (int i = 0; i < runs; ++i) {
          check(node.worker->run([&](NodeOrchestrator& o) {
            return o.submit_next_level(node.empty, TaskArgs(), {}, 0);
          }),
                "run");
        }
        one_s.push_back(seconds_since(start) / runs);
        start = Clock::now();
        for (int i = 0; i < runs; ++i) pool.run(1, window);
        pool_one_s.push_back(seconds_since(start) / runs);
      }
      const double e = hp::bench::median(empty_s), o = hp::bench::median(one_s),
                   q = hp::bench::median(pool_one_s);
      std::printf("%-34s hp: %7.2f us\n", "run, empty orchestration", e * 1e6);
      std::printf("%-34s hp: %7.2f us  pool: %7.2f us  hp/pool: %5.2f  hp/floor: %5.2f\n",
                  "run, one next-level task", o * 1e6, q * 1e6, o / q, o / floor_s);
    }
    check(node.worker->close(), "close");
  }
  return 0;
}
