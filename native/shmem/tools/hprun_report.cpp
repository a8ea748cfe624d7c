#include "shmem/tools/hprun_report.h"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <utility>

#include <fmt/format.h>

#include "common/settings.h"

namespace hp::shmem::hprun {

bool rank_succeeded(const RankEnd& end) noexcept {
  return end.reaped && WIFEXITED(end.wait_status) && WEXITSTATUS(end.wait_status) == 0 &&
         (end.finalized || !end.initialized);
}

int exit_code_of(const RankEnd& end) noexcept {
  if (!end.reaped) return kExitSignalBase + SIGKILL;
  if (WIFSIGNALED(end.wait_status)) return kExitSignalBase + WTERMSIG(end.wait_status);
  const int status = WEXITSTATUS(end.wait_status);
  return status != 0 ? status : 1;
}

std::string signal_name(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("SIG{}", signo);
}

std::string describe_end(const RankEnd& end) {
  if (end.pid <= 0) return "never started";
  if (!end.reaped) return "did not exit after SIGKILL";
  if (WIFSIGNALED(end.wait_status)) {
    const int sig = WTERMSIG(end.wait_status);
    return fmt::format("killed by signal {} ({}){}{}", sig, signal_name(sig),
                       sig == end.hprun_signal ? " from hprun" : "",
                       WCOREDUMP(end.wait_status) ? ", core dumped" : "");
  }
  const int status = WEXITSTATUS(end.wait_status);
  if (status == 0 && (end.finalized || !end.initialized)) return "finished";
  return fmt::format("exited with status {} {} shmem_finalize", status,
                     end.finalized ? "after" : "before");
}

std::string summarize_ranks(std::span<const RankEnd> ends, int except_rank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // in order of first appearance
  int total = 0;
  for (const RankEnd& end : ends) {
    if (end.rank == except_rank) continue;
    ++total;
    std::string phrase = describe_end(end);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& group) { return group.first == phrase; });
    if (it == groups.end()) {
      groups.emplace_back(std::move(phrase), std::vector<int>{end.rank});
    } else {
      it->second.push_back(end.rank);
    }
  }
  if (total == 0) return {};
  std::string out = fmt::format("{} {}rank(s): ", total, except_rank >= 0 ? "other " : "");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& [phrase, ranks] = groups[i];
    out += fmt::format("{}{} {} (rank{} {})", i == 0 ? "" : ", ", ranks.size(), phrase,
                       ranks.size() == 1 ? "" : "s", format_cpu_list(ranks));
  }
  return out;
}

}  // namespace hp::shmem::hprun
