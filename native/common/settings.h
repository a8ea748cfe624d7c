// The one table of every HP_* environment variable: name, type, default, description, scope.
//
// Runtime settings are read from the environment once per process (settings()); a bad value
// is reported by settings_status() as INVALID_SETTING, and every entry point that depends on
// settings returns that status instead of running with a value the user did not ask for.
// Python and build settings are read by the Python loader and the build scripts; they are
// listed here so that `hp config` shows one complete table.
#ifndef HYPER_PARALLEL_COMMON_SETTINGS_H_
#define HYPER_PARALLEL_COMMON_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/api.h"
#include "common/status.h"

namespace hp {

enum class SettingType { kBool, kInt, kDouble, kString, kEnum, kCpuList, kPath, kSize };
enum class SettingScope { kRuntime, kPython, kBuild };

struct SettingSpec {
  std::string_view name;
  SettingType type;
  SettingScope scope;
  std::string_view default_value;  // as the user would write it; "" means unset
  std::string_view choices;        // kEnum only: "a|b|c"
  std::string_view description;
};

HP_API std::span<const SettingSpec> setting_specs() noexcept;
HP_API const SettingSpec* find_setting(std::string_view name) noexcept;
HP_API std::string_view to_string(SettingType type) noexcept;
HP_API std::string_view to_string(SettingScope scope) noexcept;

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };
enum class PinMode { kAuto, kOn, kOff };
enum class ShmemTransport { kAuto, kThreads, kShm, kMpi };
enum class MpiMessagePath { kAuto, kMessage, kRma };

// Typed values of the runtime-scope settings.
struct HP_API Settings {
  LogLevel log_level = LogLevel::kWarn;       // HP_LOG_LEVEL
  double wait_timeout_s = 60.0;               // HP_WAIT_TIMEOUT_S
  std::int64_t spin_before_block = 2000;      // HP_SPIN_BEFORE_BLOCK
  std::int64_t yield_before_sleep_us = 200;   // HP_YIELD_BEFORE_SLEEP_US
  std::int64_t idle_poll_us = 5;              // HP_IDLE_POLL_US
  std::vector<int> chip_cpus;                 // HP_CHIP_CPUS, in order (empty: the process's CPUs)
  std::vector<int> mem_nodes;                 // HP_MEM_NODES (empty: the default memory policy)
  PinMode pin_threads = PinMode::kAuto;       // HP_PIN_THREADS
  double shmem_timeout_s = 120.0;             // HP_SHMEM_TIMEOUT_S
  std::size_t shmem_heap_bytes = 256u << 20;  // HP_SHMEM_HEAP_SIZE
  ShmemTransport shmem_transport = ShmemTransport::kAuto;     // HP_SHMEM_TRANSPORT
  MpiMessagePath shmem_mpi_messages = MpiMessagePath::kAuto;  // HP_SHMEM_MPI_MESSAGES
  std::string kernel_target = "auto";    // HP_KERNEL_TARGET: auto, reference or a SoC target
  int rank = -1;                         // HP_RANK (-1: unset)
  int world_size = -1;                   // HP_WORLD_SIZE (-1: unset)
  std::string job_id;                    // HP_JOB_ID
  int local_rank = -1;                   // HP_LOCAL_RANK (-1: unset)
  int local_size = -1;                   // HP_LOCAL_SIZE (-1: unset)
  std::vector<std::string> vendor_path;  // HP_VENDOR_PATH, split at ':' (empty parts dropped)
  // HP_ACTIVATED (empty: this process was not activated)
  std::string activated;

  using Lookup = std::function<std::optional<std::string>(std::string_view name)>;
  // Parses every runtime setting through `lookup`; unset names take their defaults. On error
  // `out` holds defaults for the bad entries and the status names the first bad variable.
  static Status parse(const Lookup& lookup, Settings* out);
};

// The process's settings, parsed from the environment on first use (thread-safe, once).
HP_API const Settings& settings();
HP_API const Status& settings_status();

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}, in the order written, a repeated number dropped
// ("4-5,0,4" -> {4,5,0}). Empty text -> empty list.
HP_API Status parse_cpu_list(std::string_view text, std::vector<int>* cpus);
// The inverse: runs of consecutive increasing numbers as "N-M", in the order given.
HP_API std::string format_cpu_list(std::span<const int> cpus);

}  // namespace hp

#endif  // HYPER_PARALLEL_COMMON_SETTINGS_H_
