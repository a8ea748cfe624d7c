// Starting one rank: fork, the child's setup, exec.
#ifndef HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_SPAWN_H_
#define HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_SPAWN_H_

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "shmem/job.h"

namespace hp::shmem::hprun {

// NULL-terminated char* array over strings that must outlive it (argv, envp for exec).
class CStringArray {
 public:
  explicit CStringArray(const std::vector<std::string>& strings);
  char* const* data() const noexcept { return pointers_.data(); }

 private:
  std::vector<char*> pointers_;
};

// Everything the child needs, prepared by the parent: between fork and exec the child only
// makes system calls on these.
struct ChildSetup {
  const char* program = nullptr;     // path to exec
  const char* shown_name = nullptr;  // the program as the user wrote it (error messages)
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdio[3] = {-1, -1, -1};            // dup2'ed onto 0, 1, 2 when >= 0; -1 inherits hprun's
  const sigset_t* signal_mask = nullptr;  // hprun's original mask, restored before exec
  const struct rlimit* nofile = nullptr;  // RLIMIT_NOFILE to restore (nullptr: unchanged)
  pid_t parent = -1;                      // hprun's pid: the child exits if it is gone
  PeSlot* slot = nullptr;                 // the rank's slot: the child writes its pid there
};

// Forks a child that sets PR_SET_PDEATHSIG(SIGTERM), applies `setup` and execs the program.
// If exec fails the child prints "hprun: cannot run '<prog>': <reason>" and exits 127.
Status spawn_rank(const ChildSetup& setup, pid_t* pid);

}  // namespace hp::shmem::hprun

#endif  // HYPER_PARALLEL_SHMEM_TOOLS_HPRUN_SPAWN_H_
