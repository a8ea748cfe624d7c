#include "shmem/tools/hprun_output.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <string_view>

#include <fmt/format.h>

namespace hp::shmem::hprun {

OutputRelay::~OutputRelay() {
  for (Source& source : sources_) {
    if (source.fd >= 0) close(source.fd);
  }
}

Status OutputRelay::add_rank(int rank, int child_fds[2]) {
  for (int destination = 0; destination < 2; ++destination) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      const int err = errno;
      if (destination == 1) close(child_fds[0]);
      return Status::error(ErrorCode::kSystemError, "cannot create the output pipes of rank {}: {}",
                           rank, std::strerror(err));
    }
    sources_.push_back(Source{.rank = rank, .fd = fds[0], .destination = destination});
    child_fds[destination] = fds[1];
  }
  return Status::ok();
}

bool OutputRelay::has_open_sources() const noexcept {
  for (const Source& source : sources_) {
    if (source.fd >= 0) return true;
  }
  return false;
}

bool OutputRelay::has_queued_output() const noexcept {
  for (const Destination& d : destinations_) {
    if (d.queued() > 0) return true;
  }
  return false;
}

void OutputRelay::add_poll_fds(std::vector<pollfd>* fds) {
  polled_.clear();
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    const Source& source = sources_[i];
    const Destination& destination = destinations_[std::size_t(source.destination)];
    if (source.fd < 0 || destination.queued() >= kMaxQueued) continue;  // backpressure
    fds->push_back(pollfd{.fd = source.fd, .events = POLLIN, .revents = 0});
    polled_.push_back(int(i));
  }
  for (std::size_t d = 0; d < destinations_.size(); ++d) {
    if (destinations_[d].queued() == 0) continue;
    fds->push_back(pollfd{.fd = destinations_[d].fd, .events = POLLOUT, .revents = 0});
    polled_.push_back(-1 - int(d));
  }
}

void OutputRelay::handle(std::span<const pollfd> entries) {
  for (std::size_t i = 0; i < entries.size() && i < polled_.size(); ++i) {
    if (entries[i].revents == 0) continue;
    if (polled_[i] >= 0) {
      read_source(sources_[std::size_t(polled_[i])]);
      continue;
    }
    Destination& destination = destinations_[std::size_t(-1 - polled_[i])];
    if (entries[i].revents & POLLOUT) {
      write_some(destination);
    } else {  // POLLERR, POLLHUP: nobody reads it any more
      destination.broken = true;
      destination.queue.clear();
      destination.written = 0;
    }
  }
}

void OutputRelay::read_source(Source& source) {
  char buffer[64 << 10];
  const ssize_t n = read(source.fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    end_source(source);
    return;
  }
  source.partial.append(buffer, std::size_t(n));
  std::size_t start = 0;
  for (std::size_t newline; (newline = source.partial.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    queue_line(source, std::string_view(source.partial).substr(start, newline + 1 - start));
  }
  source.partial.erase(0, start);
  if (source.partial.size() >= kMaxLine) {
    queue_line(source, source.partial);
    source.partial.clear();
  }
}

void OutputRelay::end_source(Source& source) {
  if (!source.partial.empty()) queue_line(source, source.partial);
  source.partial.clear();
  close(source.fd);
  source.fd = -1;
}

void OutputRelay::close_sources() {
  for (Source& source : sources_) {
    if (source.fd >= 0) end_source(source);
  }
}

void OutputRelay::queue_line(const Source& source, std::string_view line) {
  Destination& destination = destinations_[std::size_t(source.destination)];
  if (destination.broken) return;
  fmt::format_to(std::back_inserter(destination.queue), "[{}] ", source.rank);
  destination.queue.append(line);
  if (line.empty() || line.back() != '\n') destination.queue.push_back('\n');
}

void OutputRelay::write_some(Destination& destination) {
  const std::string_view pending = std::string_view(destination.queue).substr(destination.written);
  std::size_t size = std::min<std::size_t>(pending.size(), PIPE_BUF);
  if (size < pending.size()) {
    // Whole lines when they fit, so lines of stdout and stderr never mix in a shared file.
    const std::size_t last_newline = pending.substr(0, size).rfind('\n');
    if (last_newline != std::string_view::npos) size = last_newline + 1;
  }
  const ssize_t n = write(destination.fd, pending.data(), size);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    destination.broken = true;  // EPIPE (SIGPIPE is blocked) or another final error
    destination.queue.clear();
    destination.written = 0;
    return;
  }
  last_write_ = std::chrono::steady_clock::now();
  destination.written += std::size_t(n);
  if (destination.written == destination.queue.size()) {
    destination.queue.clear();
    destination.written = 0;
  } else if (destination.written >= kMaxQueued) {
    destination.queue.erase(0, destination.written);
    destination.written = 0;
  }
}

void OutputRelay::drop_queued_output() {
  for (Destination& destination : destinations_) {
    destination.queue.clear();
    destination.written = 0;
  }
}

}  // namespace hp::shmem::hprun
