// CPU affinity of the process and of threads (Linux sched_*affinity).
#ifndef HYPER_PARALLEL_PLATFORM_CPU_AFFINITY_H_
#define HYPER_PARALLEL_PLATFORM_CPU_AFFINITY_H_

#include <pthread.h>

#include <span>
#include <vector>

#include "common/api.h"
#include "common/status.h"

namespace hp::platform {

// The CPUs this process may run on (sorted).
HP_API Status allowed_cpus(std::vector<int>* cpus);
// Restricts a thread to `cpus` (one CPU pins it).
HP_API Status set_thread_affinity(pthread_t thread, std::span<const int> cpus);
// The CPUs the calling thread may run on (sorted).
HP_API Status current_thread_affinity(std::vector<int>* cpus);

}  // namespace hp::platform

#endif  // HYPER_PARALLEL_PLATFORM_CPU_AFFINITY_H_
