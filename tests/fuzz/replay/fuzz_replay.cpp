// Fuzz target: replay of a recorded deps.json (hp::runtime::replay), which reads a file another
// run wrote. Input: the deps.json. The replaying worker has a callable under each name the seeds
// (runs of the hp-example programs) recorded, each of which touches no memory: the target is the
// file's reading and the schedule it asks for, not what the recorded kernels compute.
//
// Expected: the replay runs, or fails with CORRUPT_DATA (a file that is not a deps.json this
// build reads: a scope chain that loops, an edge to a later task, a number that does not parse),
// NOT_FOUND (a callable without a slot) or the submit's own errors for the arguments the file
// describes (INVALID_ARGUMENT, OUT_OF_RANGE, OUT_OF_MEMORY, SHAPE_MISMATCH, DTYPE_MISMATCH,
// MISALIGNED). It
// never waits out a deadline (TIMEOUT): a recorded schedule cannot deadlock a replay.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "runtime/replay.h"

namespace {

using hp::ErrorCode;
using namespace hp::runtime;

struct Replayer {
  std::unique_ptr<ChipWorker> worker;
  ReplayBindings bindings;
  OrchestratorConfig config;

  Replayer() {
    if (!ChipWorker::create({.num_cube = 1, .num_vector = 1}, &worker).is_ok()) {
      hp::fuzz::fail("cannot create a chip worker");
    }
    for (const char* name :
         {"hp_example_add_f32", "hp_example_scale_f32", "hp_example_sum_f32",
          "hp_example_tile_gemm_f32", "hp_example_bias_act_f32", "hp_example_paged_attention"}) {
      const Callable c = Callable::from_function(
          name, [](const TaskArgs&, hp::platform::BlockContext&) { return hp::Status::ok(); },
          std::string(name) + "-fuzz");
      if (!worker->register_callable(c, &bindings.callables[name]).is_ok()) {
        hp::fuzz::fail("cannot register a callable");
      }
    }
    config.heap_ring_bytes = 1u << 20;
    config.task_ring_slots = 64;
    config.wait_timeout_s = 5.0;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Replayer replayer;
  const std::string path = hp::fuzz::scratch_dir() + "/deps.json";
  hp::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  const hp::Status s = replay(*replayer.worker, path, replayer.bindings, replayer.config);
  hp::fuzz::expect_status(
      s,
      {ErrorCode::kCorruptData, ErrorCode::kNotFound, ErrorCode::kInvalidArgument,
       ErrorCode::kOutOfRange, ErrorCode::kOutOfMemory, ErrorCode::kShapeMismatch,
       ErrorCode::kDTypeMismatch, ErrorCode::kMisaligned},
      "replay");
  return 0;
}
