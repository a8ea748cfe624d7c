// A chip process: forked by NodeWorker::start(), it joins the node's symmetric memory job as
// its PE, creates its ChipWorker and serves its mailbox until the parent shuts it down (or
// dies: PR_SET_PDEATHSIG takes the chip with it). Tasks run in orchestration sessions: the
// session's orchestration function reads the mailbox and submits each task in a scope of its
// own; an observer sends each task's completion back. A session ends when the parent asks (its
// diagnostics are then written) or when it failed (a task failed: the orchestrator refuses
// further submits), in which case the chip begins a plain session by itself.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "common/json_file.h"
#include "common/logging.h"
#include "platform/cpu_affinity.h"
#include "runtime/node/frames.h"
#include "runtime/node/node_diagnostics.h"
#include "runtime/node/node_worker_impl.h"
#include "runtime/orchestrator.h"

namespace hp::runtime {

namespace {

using node::Frame;
using node::FrameReader;
using node::FrameWriter;

class ChipProcess : public Observer {
 public:
  ChipProcess(NodeWorker::Impl& impl, int chip)
      : impl_(impl), chip_(chip), mailbox_(*impl.mailboxes[std::size_t(chip)]) {}

  Status init() {
    const platform::ChipConfig& config = impl_.chip_configs[std::size_t(chip_)];
    // The whole process stays inside its share of the CPUs.
    if (!config.cpus.empty()) (void)platform::set_thread_affinity(pthread_self(), config.cpus);
    HP_RETURN_IF_ERROR(impl_.job->join(chip_).with_context("joining the symmetric memory job"));
    HP_RETURN_IF_ERROR(ChipWorker::create(config, &worker_).with_context("creating its chip"));
    if (impl_.config.on_chip_start) {
      HP_RETURN_IF_ERROR(impl_.config.on_chip_start(chip_).with_context("on_chip_start"));
    }
    return Status::ok();
  }

  // Until shutdown: sessions, and registrations between them.
  void serve() {
    Frame frame;
    while (next_frame(&frame)) {
      if (frame.type == node::kBeginSession) {
        node::SessionFrame session;
        if (Status s = node::decode_session(frame.payload, &session); !s.is_ok()) {
          report_session(s, false);
          continue;
        }
        run_sessions(session);
      } else if (frame.type == node::kEndSession) {
        report_session(Status::ok(), true);  // none was open
      } else {
        handle_between_tasks(frame);
      }
    }
  }

  // --- Observer (the session's): task ids to keys, and completions back to the parent ---
  void on_task_submit(const TaskInfo& task, std::span<const Dependency>,
                      const Occupancy&) override {
    std::lock_guard lock(keys_mutex_);
    keys_[task.id] = pending_key_;
    pending_taken_ = true;
    if (record_spawned_) {
      spawned_.push_back(
          {{"task", std::to_string(task.id)}, {"l3_task", std::to_string(pending_l3_task_)}});
    }
  }
  void on_task_complete(const TaskInfo& task, const Status& status) override {
    if (!status.is_ok() && !session_failed_.exchange(true)) {
      // The session's orchestrator refuses every later submit: the loop ends it (before it
      // reads another frame; the parent sends the next run's only after this one's answers).
      platform::notify_event(mailbox_.header->request_event, true);
    }
    std::uint64_t key = 0;
    {
      std::lock_guard lock(keys_mutex_);
      auto it = keys_.find(task.id);
      if (it == keys_.end()) return;
      key = it->second;
      keys_.erase(it);
    }
    reply(node::kDone, key, status);
  }

 private:
  bool shutdown() const noexcept {
    return mailbox_.header->shutdown.load(std::memory_order_acquire) != 0;
  }

  // The next frame; false at shutdown (or when the parent is gone), and, with `in_session`,
  // when the session failed.
  bool next_frame(Frame* frame, bool in_session = false) {
    for (;;) {
      if (shutdown() || (in_session && session_failed_.load())) return false;
      if (mailbox_.request.read(frame)) return true;
      platform::wait_event(
          mailbox_.header->request_event,
          [&] {
            return shutdown() || (in_session && session_failed_.load()) ||
                   !mailbox_.request.empty();
          },
          platform::deadline_after(1.0), node::mailbox_policy(), nullptr);
      if (::getppid() != impl_.parent_pid) return false;
    }
  }

  void reply(std::uint32_t type, std::uint64_t key, const Status& status) {
    FrameWriter frame;
    node::encode_status(key, status, &frame);
    Status s =
        mailbox_.reply.write(type, frame.bytes(), platform::deadline_after(impl_.timeout_s), [&] {
          return shutdown() ? Status::error(ErrorCode::kAborted, "shut down") : Status::ok();
        });
    if (!s.is_ok()) HP_LOG_WARN("chip {}: cannot answer the node worker: {}", chip_, s.to_string());
  }
  void report_session(const Status& status, bool asked) {
    reply(node::kSessionEnded, asked ? 1 : 0, status);
  }

  void run_sessions(node::SessionFrame session) {
    for (;;) {
      bool asked = false;
      OrchestratorConfig config;
      config.task_ring_slots = session.task_ring_slots;
      config.heap_ring_bytes = session.heap_ring_bytes;
      config.wait_timeout_s = impl_.timeout_s;
      config.observers = {this};
      config.diagnostics = session.diagnostics;
      record_spawned_ = session.diagnostics.dep_gen || session.diagnostics.swimlane;
      spawned_ = Json::array();
      // A session ends by itself only when it failed: the run's status says why.
      Status status = Orchestrator::run(
          *worker_, [&](Orchestrator& o) { return session_loop(o, &asked); }, config);
      {
        std::lock_guard lock(keys_mutex_);
        keys_.clear();
      }
      if (record_spawned_) {
        // Which node-level task each of this session's tasks was (node_diagnostics.h).
        const Json doc = {{"runtime_level", 2}, {"chip", chip_}, {"spawned", spawned_}};
        Status written = write_json_file(
            session.diagnostics.output_prefix + "/" + std::string(kSpawnedFile), doc);
        if (status.is_ok()) status = written;
      }
      if (shutdown()) return;
      report_session(status, asked);
      if (asked) return;
      session = node::SessionFrame{};  // a failed session: go on without diagnostics
    }
  }

  Status session_loop(Orchestrator& o, bool* asked) {
    session_failed_ = false;
    if (carried_) {  // refused by the session that failed before
      carried_ = submit(o, carry_) ? false : true;
      if (carried_) return Status::ok();
    }
    Frame frame;
    while (next_frame(&frame, true)) {
      switch (frame.type) {
        case node::kTask:
          if (!submit(o, frame)) {
            carry_ = std::move(frame);
            carried_ = true;
            return Status::ok();
          }
          break;
        case node::kEndSession:
          *asked = true;
          return Status::ok();
        default:
          handle_between_tasks(frame);
      }
    }
    return Status::ok();
  }

  // Submits a task frame; false when the session had failed and refused it (it belongs to
  // the next session).
  bool submit(Orchestrator& o, const Frame& frame) {
    node::TaskFrame task;
    Status s = node::decode_task(frame.payload, &task);
    int slot = -1;
    if (s.is_ok()) s = slot_of(task.digest, &slot);
    if (s.is_ok()) {
      auto scope = o.scope();
      {
        std::lock_guard lock(keys_mutex_);
        pending_key_ = task.key;
        pending_l3_task_ = task.l3_task;
        pending_taken_ = false;
      }
      s = o.submit(slot, task.args, task.config);
      std::lock_guard lock(keys_mutex_);
      if (pending_taken_) return true;  // its completion goes back through the observer
      if (s.code() == ErrorCode::kAborted && session_failed_.load()) return false;
    }
    reply(node::kDone, task.key, s);
    return true;
  }

  Status slot_of(const Sha256Digest& digest, int* slot) {
    auto failed = failed_.find(digest);
    if (failed != failed_.end()) return failed->second;
    auto it = slots_.find(digest);
    HP_ENSURE(it != slots_.end(), ErrorCode::kNotFound,
              "chip {} does not know callable {} (it was not registered with it)", chip_,
              to_hashid(digest));
    *slot = it->second;
    return Status::ok();
  }

  void handle_between_tasks(const Frame& frame) {
    if (frame.type == node::kRegister) {
      register_callable(frame);
    } else if (frame.type == node::kUnregister) {
      FrameReader in(frame.payload, "unregister");
      const auto digest = in.get<Sha256Digest>();
      if (!in.finish().is_ok()) return;
      failed_.erase(digest);
      auto it = slots_.find(digest);
      if (it == slots_.end()) return;
      (void)worker_->unregister_callable(it->second);
      slots_.erase(it);
    }
  }

  // A callable the parent sent: a library symbol is loaded here and must hash to the digest; a
  // function one must be among those this process inherited. A failure is kept and fails every
  // task of it, with the reason.
  void register_callable(const Frame& frame) {
    FrameReader in(frame.payload, "register");
    const auto digest = in.get<Sha256Digest>();
    const auto kind = static_cast<CallableKind>(in.get<std::uint8_t>());
    const std::string name = in.str();
    const std::string name_space = in.str();
    const std::string path = in.str();
    const std::vector<std::byte> identity = in.blob();
    Status s = in.finish();
    Callable callable;
    if (s.is_ok() && kind == CallableKind::kLibrarySymbol) {
      s = Callable::from_library(path, name, &callable, name_space, identity);
      if (s.is_ok() && !(callable.handle().digest == digest)) {
        s = Status::error(ErrorCode::kCorruptData,
                          "{} in {} hashes to {} on chip {}, not to the registered {}: the "
                          "library changed after it was registered",
                          name, path, callable.handle().hashid(), chip_, to_hashid(digest));
      }
    } else if (s.is_ok()) {
      auto it = impl_.inherited.find(digest);
      if (it == impl_.inherited.end()) {
        s = Status::error(ErrorCode::kFailedPrecondition,
                          "chip {} has no function callable '{}' ({}): function callables must "
                          "be registered before the node worker starts",
                          chip_, name, to_hashid(digest));
      } else {
        callable = *it->second;
      }
    }
    int slot = -1;
    if (s.is_ok()) s = worker_->register_callable(callable, &slot);
    if (!s.is_ok()) {
      failed_[digest] = s.with_context(fmt::format("registering '{}' on chip {}", name, chip_));
      return;
    }
    slots_[digest] = slot;
  }

  NodeWorker::Impl& impl_;
  const int chip_;
  node::Mailbox& mailbox_;
  std::unique_ptr<ChipWorker> worker_;
  std::map<Sha256Digest, int> slots_;
  std::map<Sha256Digest, Status> failed_;
  std::mutex keys_mutex_;
  std::unordered_map<TaskId, std::uint64_t> keys_;
  std::uint64_t pending_key_ = 0;
  TaskId pending_l3_task_ = kNoTask;
  bool pending_taken_ = false;
  bool record_spawned_ = false;
  Json spawned_ = Json::array();  // under keys_mutex_
  std::atomic<bool> session_failed_{false};
  Frame carry_;  // a task frame the failed session refused
  bool carried_ = false;
};

void report_state(node::MailboxHeader& header, node::ChipState state, const Status& why) {
  if (!why.is_ok()) {
    const std::string text = why.to_string();
    const std::size_t n = std::min(text.size(), sizeof(header.init_error) - 1);
    std::memcpy(header.init_error, text.data(), n);
    header.init_error[n] = '\0';
    header.init_code.store(std::uint32_t(why.code()), std::memory_order_relaxed);
  }
  header.state.store(std::uint32_t(state), std::memory_order_release);
  platform::notify_event(header.state_event, true);
}

}  // namespace

void run_chip_process(NodeWorker::Impl& impl, int chip) noexcept {
  // Its own process group (a terminal's Ctrl-C goes to the parent, which shuts the chips
  // down), and no life after the parent.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != impl.parent_pid) std::_Exit(1);
  if (impl.config.after_fork_child) impl.config.after_fork_child();
  node::MailboxHeader& header = *impl.mailboxes[std::size_t(chip)]->header;
  int code = 0;
  try {
    ChipProcess process(impl, chip);
    if (Status s = process.init(); !s.is_ok()) {
      report_state(header, node::ChipState::kFailed, s);
      code = 3;
    } else {
      report_state(header, node::ChipState::kReady, Status::ok());
      process.serve();
    }
  } catch (const std::exception& e) {
    report_state(header, node::ChipState::kFailed,
                 Status::error(ErrorCode::kInternal, "chip {} threw: {}", chip, e.what()));
    code = 4;
  }
  std::fflush(nullptr);
  // Never back into the parent's code: its threads and objects are not this process's.
  std::_Exit(code);
}

}  // namespace hp::runtime
