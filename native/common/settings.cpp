#include "common/settings.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "soc_target_table.inc"

namespace hp {
namespace {

using T = SettingType;
using S = SettingScope;

constexpr std::array kSpecs = {
    SettingSpec{"HP_LOG_LEVEL", T::kEnum, S::kRuntime, "warn", "trace|debug|info|warn|error|off",
                "least severe native log message printed to stderr"},
    SettingSpec{"HP_WAIT_TIMEOUT_S", T::kDouble, S::kRuntime, "60", "",
                "deadline in seconds of every cross-core wait (flags, barriers); a wait past it "
                "fails with TIMEOUT naming what it waited on"},
    SettingSpec{"HP_SPIN_BEFORE_BLOCK", T::kInt, S::kRuntime, "2000", "",
                "pause-loop iterations a waiting core spins before it yields and sleeps on a "
                "futex (0 when the chip's cores and the launching thread outnumber its CPUs)"},
    SettingSpec{"HP_YIELD_BEFORE_SLEEP_US", T::kInt, S::kRuntime, "200", "",
                "microseconds a waiter keeps yielding its CPU (sched_yield) after spinning and "
                "before it sleeps on a futex; a sleeping waiter costs whoever wakes it a system "
                "call"},
    SettingSpec{"HP_IDLE_POLL_US", T::kInt, S::kRuntime, "5", "",
                "microseconds between an idle task-runtime core's looks for new work while it "
                "spins or yields (0: it looks at every step); each look pulls the lines the "
                "submitting thread writes to hand work over, which that thread must then take "
                "back; a new task (or a gang's share, or the run's end) reaches an idle core up "
                "to this late"},
    SettingSpec{"HP_CHIP_CPUS", T::kCpuList, S::kRuntime, "", "",
                "CPUs this rank's chip may use, as a cpulist (\"0-3,8\"), in the order its cores "
                "are pinned to them; set per rank by `hprun --bind` and by the activation; empty: "
                "the process's affinity mask"},
    SettingSpec{"HP_MEM_NODES", T::kCpuList, S::kRuntime, "", "",
                "NUMA nodes (a list like \"0-1\") this rank's symmetric heap is bound to (mbind); "
                "set per rank by `hprun --bind` on a machine with more than one node; empty: "
                "the kernel's default policy"},
    SettingSpec{"HP_PIN_THREADS", T::kEnum, S::kRuntime, "auto", "auto|on|off",
                "pin each chip core to one CPU of HP_CHIP_CPUS; auto: only when every core "
                "gets a CPU of its own"},
    SettingSpec{"HP_SHMEM_TIMEOUT_S", T::kDouble, S::kRuntime, "120", "",
                "deadline in seconds of every symmetric-memory wait (wait_until, barriers, "
                "collectives); past it the call fails with TIMEOUT naming the PE and address"},
    SettingSpec{"HP_SHMEM_HEAP_SIZE", T::kSize, S::kRuntime, "256M", "",
                "bytes of each PE's symmetric heap (K, M, G suffixes); every PE of a job must "
                "use the same size (hprun --heap-size sets it for all)"},
    SettingSpec{"HP_SHMEM_TRANSPORT", T::kEnum, S::kRuntime, "auto", "auto|threads|shm|mpi",
                "how PEs reach each other; auto: shm under hprun, mpi under mpirun (this host's "
                "PEs mapped, the others through MPI-3 RMA), one PE alone otherwise; mpi: every "
                "PE through MPI-3 RMA"},
    SettingSpec{"HP_SHMEM_MPI_MESSAGES", T::kEnum, S::kRuntime, "auto", "auto|message|rma",
                "how the mpi transport carries atomics and put_signal (of up to 32 KiB); "
                "message: MPI messages the target applies in its shmem calls (a put_signal's data "
                "and signal in one); rma: MPI-3 atomics, a put_signal as a put, a flush (a round "
                "trip) and an atomic; auto: message to PEs on other hosts, rma on this host"},
    SettingSpec{"HP_KERNEL_TARGET", T::kEnum, S::kRuntime, "auto",
                "auto|reference|" HP_SOC_TARGET_NAMES,
                "the kernel target (SoC library) to use; auto: the best one this CPU supports "
                "among those in the payload; a target the CPU or the payload lacks is an error"},
    SettingSpec{"HP_RANK", T::kInt, S::kRuntime, "", "",
                "this process's PE number in its job (set by hprun)"},
    SettingSpec{"HP_WORLD_SIZE", T::kInt, S::kRuntime, "", "",
                "the number of PEs of the job (set by hprun)"},
    SettingSpec{"HP_JOB_ID", T::kString, S::kRuntime, "", "",
                "the job whose control segment /dev/shm/hp.<id>.ctl this PE joins (set by hprun)"},
    SettingSpec{"HP_LOCAL_RANK", T::kInt, S::kRuntime, "", "",
                "this process's index among the job's PEs on this host (set by hprun)"},
    SettingSpec{"HP_LOCAL_SIZE", T::kInt, S::kRuntime, "", "",
                "the number of the job's PEs on this host (set by hprun)"},
    SettingSpec{"HP_VENDOR_PATH", T::kPath, S::kRuntime, "", "",
                "op package directories (each with an ops.json) hp::ops::find searches after the "
                "payload's own, colon-separated, read once at the first lookup"},
    SettingSpec{"HP_ACTIVATED", T::kString, S::kRuntime, "", "",
                "set by the activation (multicore/lib/set_env.bash, or the wheel's "
                "hyper_parallel_multicore_set_env.bash): the payload's identity; an op found in an "
                "HP_VENDOR_PATH package needs it"},
    SettingSpec{"HP_PAYLOAD_DIR", T::kPath, S::kPython, "", "",
                "load native components from this payload (a build/native/payload/hyper_parallel "
                "directory) instead of the installed or development one"},
    SettingSpec{"HP_BUILD_DIR", T::kPath, S::kBuild, "<repo>/build", "",
                "where build.sh, the component scripts and the tests put everything they make"},
    SettingSpec{"HP_CACHE_DIR", T::kPath, S::kBuild, "<HP_BUILD_DIR>/native/cache", "",
                "heavy component caches, keyed by sources, compiler, flags and targets"},
    SettingSpec{
        "HP_SHMEM_HOME", T::kPath, S::kBuild, "", "",
        "the symmetric-memory SDK the custom_ops build compiles ops that require SHMEM against (a "
        "root laid out as the payload's symmetric_memory slice); default: this build's own"},
    SettingSpec{"HP_SANITIZE", T::kEnum, S::kBuild, "",
                "|address|undefined|address,undefined|thread",
                "build the native components with this sanitizer"},
    SettingSpec{"HP_SANITIZE_PYTHON", T::kBool, S::kBuild, "0", "",
                "a sanitizer build also builds the CPython extensions (scripts/build_fuzzers.sh "
                "sets it; a regular build always does)"},
    SettingSpec{"HP_FUZZ", T::kBool, S::kBuild, "0", "",
                "build the fuzz targets of tests/fuzz (clang; scripts/build_fuzzers.sh sets it)"},
    SettingSpec{"HP_BUILD_TESTS", T::kBool, S::kBuild, "1", "",
                "build the tests with the native components (0: libraries and tools only)"},
    SettingSpec{"HP_CC", T::kPath, S::kBuild, "cc", "",
                "the C compiler hpcc runs to build OpenSHMEM programs against the payload (a "
                "sanitizer build's hpcc: by default the compiler that built it)"},
    SettingSpec{"HP_WERROR", T::kBool, S::kBuild, "0", "", "build with -Werror (CI sets it)"},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

Status bad(const SettingSpec& spec, std::string_view value, std::string_view expected) {
  return Status::error(ErrorCode::kInvalidSetting,
                       "{}='{}' is invalid: expected {} (default '{}'); fix or unset it", spec.name,
                       value, expected, spec.default_value);
}

Status parse_int(const SettingSpec& spec, std::string_view text, std::int64_t min, std::int64_t max,
                 std::int64_t* out) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    return bad(spec, text, fmt::format("an integer in [{}, {}]", min, max));
  }
  *out = v;
  return Status::ok();
}

// Locale-independent (std::from_chars), bounded to [1 us, ~31 years].
Status parse_seconds(const SettingSpec& spec, std::string_view text, double* out) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 1e-6 ||
      v > 1e9) {
    return bad(spec, text, "a number of seconds in [1e-6, 1e9]");
  }
  *out = v;
  return Status::ok();
}

// Index of `text` among spec.choices ("a|b|c").
Status parse_choice(const SettingSpec& spec, std::string_view text, int* index) {
  std::string_view rest = spec.choices;
  for (int i = 0;; ++i) {
    auto bar = rest.find('|');
    if (rest.substr(0, bar) == text) {
      *index = i;
      return Status::ok();
    }
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return bad(spec, text, fmt::format("one of {}", spec.choices));
}

}  // namespace

std::span<const SettingSpec> setting_specs() noexcept { return kSpecs; }

const SettingSpec* find_setting(std::string_view name) noexcept {
  for (const auto& spec : kSpecs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string_view to_string(SettingType type) noexcept {
  switch (type) {
    case T::kBool:
      return "bool";
    case T::kInt:
      return "int";
    case T::kDouble:
      return "double";
    case T::kString:
      return "string";
    case T::kEnum:
      return "enum";
    case T::kCpuList:
      return "cpulist";
    case T::kPath:
      return "path";
    case T::kSize:
      return "size";
  }
  return "unknown";
}

std::string_view to_string(SettingScope scope) noexcept {
  switch (scope) {
    case S::kRuntime:
      return "runtime";
    case S::kPython:
      return "python";
    case S::kBuild:
      return "build";
  }
  return "unknown";
}

Status parse_cpu_list(std::string_view text, std::vector<int>* cpus) {
  cpus->clear();
  text = trim(text);
  if (text.empty()) return Status::ok();
  constexpr int kMaxCpu = 1 << 16;
  auto number = [&](std::string_view s, int* v) {
    s = trim(s);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size() && *v >= 0 && *v < kMaxCpu;
  };
  for (;;) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    auto dash = item.find('-');
    int lo = 0, hi = 0;
    bool ok = dash == std::string_view::npos
                  ? number(item, &lo) && (hi = lo, true)
                  : number(item.substr(0, dash), &lo) && number(item.substr(dash + 1), &hi);
    if (!ok || lo > hi) {
      return Status::error(ErrorCode::kInvalidArgument,
                           "bad cpulist item '{}': expected N or N-M with 0 <= N <= M < {}", item,
                           kMaxCpu);
    }
    for (int c = lo; c <= hi; ++c) cpus->push_back(c);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);  // an empty item after a trailing comma is an error
  }
  // Duplicates dropped, the first occurrence kept: the order is the chip's pinning order.
  std::vector<int> seen;
  std::erase_if(*cpus, [&](int c) {
    if (std::size_t(c) >= seen.size()) seen.resize(std::size_t(c) + 1, 0);
    return std::exchange(seen[std::size_t(c)], 1) != 0;
  });
  return Status::ok();
}

std::string format_cpu_list(std::span<const int> cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

// "256M", "1G", "65536", "64K" (binary multiples) -> bytes, at least 1.
Status parse_size(const SettingSpec& spec, std::string_view text, std::size_t* out) {
  std::string_view digits = text;
  std::uint64_t scale = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K':
      case 'k':
        scale = 1ull << 10;
        break;
      case 'M':
      case 'm':
        scale = 1ull << 20;
        break;
      case 'G':
      case 'g':
        scale = 1ull << 30;
        break;
      default:
        break;
    }
    if (scale != 1) digits.remove_suffix(1);
  }
  std::uint64_t v = 0, bytes = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v == 0 ||
      __builtin_mul_overflow(v, scale, &bytes)) {
    return bad(spec, text, "a size in bytes, optionally with K, M or G (\"256M\")");
  }
  *out = std::size_t(bytes);
  return Status::ok();
}

Status Settings::parse(const Lookup& lookup, Settings* out) {
  *out = Settings();
  Status first;
  // Each reader parses one variable (its default when unset) and keeps the first error; a bad
  // value leaves the field at its default.
  auto text_of = [&](const SettingSpec& spec) {
    auto v = lookup(spec.name);
    return std::string(v ? trim(*v) : spec.default_value);
  };
  auto note = [&](Status s) {
    if (first.is_ok() && !s.is_ok()) first = std::move(s);
  };
  auto read_choice = [&](std::string_view name, auto* field) {
    const SettingSpec& spec = *find_setting(name);
    int index = 0;
    Status s = parse_choice(spec, text_of(spec), &index);
    if (s.is_ok()) *field = static_cast<std::remove_pointer_t<decltype(field)>>(index);
    note(std::move(s));
  };
  auto read_choice_name = [&](std::string_view name, std::string* field) {
    const SettingSpec& spec = *find_setting(name);
    const std::string text = text_of(spec);
    int index = 0;
    Status s = parse_choice(spec, text, &index);
    if (s.is_ok()) *field = text;
    note(std::move(s));
  };
  auto read_seconds = [&](std::string_view name, double* field) {
    const SettingSpec& spec = *find_setting(name);
    double v = 0;
    Status s = parse_seconds(spec, text_of(spec), &v);
    if (s.is_ok()) *field = v;
    note(std::move(s));
  };
  auto read_int = [&](std::string_view name, std::int64_t min, std::int64_t max, auto* field) {
    const SettingSpec& spec = *find_setting(name);
    const std::string text = text_of(spec);
    if (text.empty()) return;  // unset and no default: the field keeps its "absent" value
    std::int64_t v = 0;
    Status s = parse_int(spec, text, min, max, &v);
    if (s.is_ok()) *field = static_cast<std::remove_pointer_t<decltype(field)>>(v);
    note(std::move(s));
  };
  auto read_size = [&](std::string_view name, std::size_t* field) {
    const SettingSpec& spec = *find_setting(name);
    std::size_t v = 0;
    Status s = parse_size(spec, text_of(spec), &v);
    if (s.is_ok()) *field = v;
    note(std::move(s));
  };

  // A list in parse_cpu_list's grammar; `what` names it in the error.
  auto read_list = [&](std::string_view name, std::string_view what, std::vector<int>* field) {
    const SettingSpec& spec = *find_setting(name);
    const std::string text = text_of(spec);
    Status s = parse_cpu_list(text, field);
    if (!s.is_ok()) {
      field->clear();
      s = bad(spec, text, fmt::format("{} ({})", what, s.message()));
    }
    note(std::move(s));
  };

  read_choice("HP_LOG_LEVEL", &out->log_level);
  read_seconds("HP_WAIT_TIMEOUT_S", &out->wait_timeout_s);
  read_int("HP_SPIN_BEFORE_BLOCK", 0, 1'000'000, &out->spin_before_block);
  read_int("HP_YIELD_BEFORE_SLEEP_US", 0, 10'000'000, &out->yield_before_sleep_us);
  read_int("HP_IDLE_POLL_US", 0, 1'000'000, &out->idle_poll_us);
  read_list("HP_CHIP_CPUS", "a cpulist", &out->chip_cpus);
  read_list("HP_MEM_NODES", "a list of NUMA nodes", &out->mem_nodes);
  read_choice("HP_PIN_THREADS", &out->pin_threads);
  read_seconds("HP_SHMEM_TIMEOUT_S", &out->shmem_timeout_s);
  read_size("HP_SHMEM_HEAP_SIZE", &out->shmem_heap_bytes);
  read_choice("HP_SHMEM_TRANSPORT", &out->shmem_transport);
  read_choice("HP_SHMEM_MPI_MESSAGES", &out->shmem_mpi_messages);
  read_choice_name("HP_KERNEL_TARGET", &out->kernel_target);
  read_int("HP_RANK", 0, 4095, &out->rank);
  read_int("HP_WORLD_SIZE", 1, 4096, &out->world_size);
  out->job_id = text_of(*find_setting("HP_JOB_ID"));
  read_int("HP_LOCAL_RANK", 0, 4095, &out->local_rank);
  read_int("HP_LOCAL_SIZE", 1, 4096, &out->local_size);
  out->activated = text_of(*find_setting("HP_ACTIVATED"));
  {
    const std::string text = text_of(*find_setting("HP_VENDOR_PATH"));
    out->vendor_path.clear();
    for (std::size_t begin = 0; begin <= text.size();) {
      const std::size_t end = std::min(text.find(':', begin), text.size());
      if (end > begin) out->vendor_path.push_back(text.substr(begin, end - begin));
      begin = end + 1;
    }
  }
  return first;
}

namespace {

struct GlobalSettings {
  Settings values;
  Status status;
};

const GlobalSettings& global_settings() {
  static const GlobalSettings global = [] {
    GlobalSettings g;
    g.status = Settings::parse(
        [](std::string_view name) -> std::optional<std::string> {
          const char* v = std::getenv(std::string(name).c_str());
          return v ? std::optional<std::string>(v) : std::nullopt;
        },
        &g.values);
    return g;
  }();
  return global;
}

}  // namespace

const Settings& settings() { return global_settings().values; }
const Status& settings_status() { return global_settings().status; }

}  // namespace hp
