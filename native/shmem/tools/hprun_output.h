// --tag-output: each rank's stdout and stderr arrive through pipes, and hprun writes them to
// its own stdout and stderr whole lines at a time, each prefixed with "[rank] ".
//
// Never blocks: pipes are read only after poll() reports them readable, and each write is at
// most PIPE_BUF bytes to a descriptor poll() reported writable (a pipe takes that whole).
// Memory is bounded: while kMaxQueued bytes wait for a destination, the ranks writing to it
// are not read (they block on their pipes, as they would on a slow stdout of their own).
#ifndef HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_OUTPUT_H_
#define HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_OUTPUT_H_

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace hp::shmem::hprun {

class OutputRelay {
 public:
  static constexpr std::size_t kMaxQueued = 1 << 20;
  static constexpr std::size_t kMaxLine = 64 << 10;  // a longer line is cut into several

  OutputRelay() = default;
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // Creates one rank's pipes (close-on-exec). child_fds[0]/[1] are the write ends for the
  // child's stdout/stderr; the caller closes them once the child is forked.
  Status add_rank(int rank, int child_fds[2]);

  // Appends the entries to poll; handle() must get exactly those entries back, with revents.
  void add_poll_fds(std::vector<pollfd>* fds);
  void handle(std::span<const pollfd> entries);

  bool has_open_sources() const noexcept;
  bool has_queued_output() const noexcept;
  std::chrono::steady_clock::time_point last_write() const noexcept { return last_write_; }

  // Stops reading the pipes still open (a rank's own children may hold them); their partial
  // lines are queued.
  void close_sources();
  // Forgets the queued output (its reader stopped reading).
  void drop_queued_output();

 private:
  struct Source {
    int rank;
    int fd;               // -1 once closed
    int destination;      // 0: stdout, 1: stderr
    std::string partial;  // the current line, not yet complete
  };
  struct Destination {
    int fd;
    std::string queue;
    std::size_t written = 0;  // bytes of `queue` already written
    bool broken = false;      // its reader is gone: output is dropped
    std::size_t queued() const noexcept { return queue.size() - written; }
  };

  void read_source(Source& source);
  void end_source(Source& source);
  void queue_line(const Source& source, std::string_view line);
  void write_some(Destination& destination);

  std::vector<Source> sources_;
  std::array<Destination, 2> destinations_{{{.fd = 1}, {.fd = 2}}};
  std::vector<int> polled_;  // per entry of add_poll_fds: source index, or -1 - destination
  std::chrono::steady_clock::time_point last_write_{};
};

}  // namespace hp::shmem::hprun

#endif  // HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_OUTPUT_H_
