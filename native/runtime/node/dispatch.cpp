// The parent's side of next-level tasks: the proxy that sends a task to its chip and defers
// its completion, and the reply reader that completes it, watches the chips' health and turns a
// chip's death into a named error for every task it held.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "common/logging.h"
#include "runtime/node/frames.h"
#include "runtime/node/node_worker_impl.h"

namespace hp::runtime {

using node::FrameWriter;

namespace {
// The reader's wait for replies: the chip watcher rings the reply bell when a chip ends, so
// this deadline only bounds the wait.
constexpr double kReaderWaitS = 1.0;
}  // namespace

Status NodeWorker::Impl::send(int chip, std::uint32_t type, std::span<const std::byte> payload) {
  node::Ring& ring = mailboxes[std::size_t(chip)]->request;
  Status s = ring.write(type, payload, platform::deadline_after(timeout_s), [&] {
    std::lock_guard lock(health_mutex);
    if (wait_status[std::size_t(chip)] != -1) {
      return Status::error(ErrorCode::kPeerDead, "{} {}", describe_chip(chip),
                           describe_wait_status(wait_status[std::size_t(chip)]));
    }
    return Status::ok();
  });
  return s.with_context(fmt::format("sending to {}", describe_chip(chip)));
}

Status NodeWorker::Impl::ensure_known(int chip, const Sha256Digest& digest) {
  std::shared_ptr<const Callable> callable;
  {
    std::lock_guard lock(callables_mutex);
    auto it = callables.find(digest);
    HP_ENSURE(it != callables.end(), ErrorCode::kNotFound,
              "a next-level task's callable {} was unregistered", to_hashid(digest));
    if (it->second.known[std::size_t(chip)]) return Status::ok();
    it->second.known[std::size_t(chip)] = 1;
    callable = it->second.callable;
  }
  FrameWriter frame;
  frame.put(digest)
      .put(std::uint8_t(callable->kind()))
      .str(callable->name())
      .str(callable->name_space())
      .str(callable->library_path())
      .blob(callable->identity());
  return send(chip, node::kRegister, frame.bytes());
}

Status NodeWorker::Impl::dispatch(const Sha256Digest& digest, const TaskArgs& args) {
  const int n = args.num_scalars();
  HP_ENSURE(n >= kHiddenScalars, ErrorCode::kInternal, "a next-level task without its scalars");
  const NextLevelShape shape = decode_next_level(std::array<std::uint64_t, kHiddenScalars>{
      args.scalar_bits(n - 3), args.scalar_bits(n - 2), args.scalar_bits(n - 1)});
  int chip = shape.chip;
  node::TaskFrame task;
  task.digest = digest;
  task.config = shape.config;
  if (chip == NodeOrchestrator::kAnyChip) {
    chip = 0;
    for (int c = 1; c < config.chips; ++c) {
      if (loads[std::size_t(c)].load(std::memory_order_relaxed) <
          loads[std::size_t(chip)].load(std::memory_order_relaxed)) {
        chip = c;
      }
    }
  }
  {
    std::lock_guard lock(health_mutex);
    if (!broken.is_ok()) return broken;
  }
  HP_RETURN_IF_ERROR(ensure_known(chip, digest));
  DeferredCompletion done;
  HP_RETURN_IF_ERROR(defer_completion(&done, describe_chip(chip)));
  std::string name;
  {
    std::lock_guard lock(callables_mutex);
    auto it = callables.find(digest);
    if (it != callables.end()) name = it->second.callable->name();
  }
  task.l3_task = done.task();
  {
    std::lock_guard lock(flight_mutex);
    task.key = next_key++;
    in_flight.emplace(task.key, InFlight{.done = done, .chip = chip, .callable = name});
  }
  loads[std::size_t(chip)].fetch_add(1, std::memory_order_relaxed);
  task.args = args;
  FrameWriter frame;
  node::encode_task(task, n - kHiddenScalars, &frame);
  Status sent = send(chip, node::kTask, frame.bytes());
  if (!sent.is_ok()) {
    // The block fails with it; the task is not in flight any more.
    std::lock_guard lock(flight_mutex);
    if (in_flight.erase(task.key) != 0) loads[std::size_t(chip)].fetch_sub(1);
  }
  return sent;
}

void NodeWorker::Impl::fail_in_flight(int chip, const Status& why) {
  std::vector<std::pair<std::uint64_t, InFlight>> failed;
  {
    std::lock_guard lock(flight_mutex);
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (it->second.chip == chip) {
        failed.emplace_back(it->first, std::move(it->second));
        it = in_flight.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [key, f] : failed) {
    loads[std::size_t(chip)].fetch_sub(1, std::memory_order_relaxed);
    Status s = why;
    s.with_context(fmt::format("task {} (callable '{}')", f.done.task(), f.callable));
    f.done.complete(std::move(s));
  }
}

void NodeWorker::Impl::chip_ended(int chip, int status) {
  const bool expected = closing.load(std::memory_order_acquire);
  Status why;
  {
    std::lock_guard lock(health_mutex);
    wait_status[std::size_t(chip)] = status;
    if (!expected) {
      why = Status::error(ErrorCode::kPeerDead, "{} {}", describe_chip(chip),
                          describe_wait_status(status));
      if (broken.is_ok()) broken = why;
    }
  }
  health_changed.notify_all();
  job->mark_dead(chip, status, expected ? "the node worker closed" : describe_wait_status(status));
  if (!expected) {
    HP_LOG_WARN("node worker: {}", why.message());
    fail_in_flight(chip, why);
  }
}

bool NodeWorker::Impl::drain_replies(std::size_t chip, node::Frame& frame) noexcept {
  bool any = false;
  while (mailboxes[chip]->reply.read(&frame)) {
    any = true;
    std::uint64_t key = 0;
    Status status;
    if (Status s = node::decode_status(frame.payload, &key, &status); !s.is_ok()) {
      HP_LOG_ERROR("node worker: from {}: {}", describe_chip(int(chip)), s.to_string());
      continue;
    }
    if (frame.type == node::kDone) {
      InFlight f;
      {
        std::lock_guard lock(flight_mutex);
        auto it = in_flight.find(key);
        if (it == in_flight.end()) continue;  // failed already (its chip died)
        f = std::move(it->second);
        in_flight.erase(it);
      }
      loads[chip].fetch_sub(1, std::memory_order_relaxed);
      f.done.complete(std::move(status.with_context(describe_chip(int(chip)))));
    } else if (frame.type == node::kSessionEnded) {
      if (key != 0) {  // the parent asked for it
        std::lock_guard lock(health_mutex);
        ++sessions_ended[chip];
        session_status[chip] = status;
      } else if (!status.is_ok()) {
        HP_LOG_DEBUG("node worker: {} restarted a failed session: {}", describe_chip(int(chip)),
                     status.to_string());
      }
      health_changed.notify_all();
    }
  }
  return any;
}

void NodeWorker::Impl::reap_chips(node::Frame& frame) noexcept {
  for (std::size_t chip = 0; chip < pids.size(); ++chip) {
    if (!to_reap[chip].exchange(false, std::memory_order_acquire)) continue;
    // Its pidfd is readable: it has ended. waitpid fails only when its status went elsewhere
    // (a process that ignores SIGCHLD has its children reaped by the kernel).
    int status = 0;
    if (waitpid(pids[chip], &status, WNOHANG) != pids[chip]) status = kWaitStatusCollectedElsewhere;
    // The chip wrote its last replies before it ended: they complete their tasks, and only
    // the tasks still in flight after them fail with the chip.
    drain_replies(chip, frame);
    chip_ended(int(chip), status);
  }
}

void NodeWorker::Impl::read_replies() noexcept {
  node::Frame frame;
  for (;;) {
    bool any = false;
    for (std::size_t chip = 0; chip < mailboxes.size(); ++chip)
      any = drain_replies(chip, frame) || any;
    reap_chips(frame);
    if (stopping.load(std::memory_order_acquire)) {
      bool all_ended = true;
      {
        std::lock_guard lock(health_mutex);
        for (int s : wait_status) all_ended = all_ended && s != -1;
      }
      if (all_ended) return;
    }
    if (any) continue;
    platform::wait_event(
        shared->reply_event,
        [&] {
          if (stopping.load(std::memory_order_acquire)) return true;
          for (std::size_t chip = 0; chip < mailboxes.size(); ++chip) {
            if (!mailboxes[chip]->reply.empty()) return true;
            if (to_reap[chip].load(std::memory_order_acquire)) return true;
          }
          return false;
        },
        platform::deadline_after(kReaderWaitS), node::mailbox_policy(), nullptr);
  }
}

void NodeWorker::Impl::watch_chips() noexcept {
  std::vector<pollfd> fds;
  std::vector<std::size_t> chip_of;
  for (std::size_t chip = 0; chip < pidfds.size(); ++chip) {
    if (pidfds[chip] < 0) continue;  // reaped at start (no pidfd)
    fds.push_back({.fd = pidfds[chip], .events = POLLIN, .revents = 0});
    chip_of.push_back(chip);
  }
  while (!fds.empty()) {
    // No deadline: every chip's process ends (close() kills what its shutdown did not end).
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      HP_LOG_ERROR("node worker: watching the chips' processes: poll: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    for (std::size_t i = fds.size(); i-- > 0;) {
      if (fds[i].revents == 0) continue;
      to_reap[chip_of[i]].store(true, std::memory_order_release);
      fds.erase(fds.begin() + std::ptrdiff_t(i));
      chip_of.erase(chip_of.begin() + std::ptrdiff_t(i));
    }
    platform::notify_event(shared->reply_event, true);
  }
}

}  // namespace hp::runtime
