// The chip against oneTBB, in the same run: fork-join launch latency, and handing tiles from a
// producer core to a consumer core (flags vs tbb::concurrent_bounded_queue).
#include <tbb/concurrent_queue.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/compare.h"
#include "platform/chip.h"

using hp::Status;
using namespace hp::platform;

namespace {

std::unique_ptr<Chip> make_chip(int cube, int vector) {
  std::unique_ptr<Chip> chip;
  Status s = Chip::create({.num_cube = cube, .num_vector = vector}, &chip);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    std::exit(1);
  }
  return chip;
}

void check(const Status& s) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const hp::bench::Options options = hp::bench::parse_options(argc, argv);
  std::printf("platform benchmarks: medians of %d interleaved rounds of %lld operations\n",
              options.rounds, static_cast<long long>(options.batch));

  // 1. Fork-join of two empty blocks: a mix launch of 1 cube + 1 vector block vs a TBB
  //    task_group running two tasks in a 2-thread arena.
  {
    auto chip = make_chip(1, 1);
    tbb::task_arena arena(2);
    std::atomic<int> sink{0};
    hp::bench::compare(
        "fork-join, 2 empty blocks",
        [&] {
          check(chip->launch({.mode = LaunchMode::kMix, .block_dim = 1}, [&](BlockContext&) {
            sink.fetch_add(1, std::memory_order_relaxed);
            return Status::ok();
          }));
        },
        "tbb::task_group",
        [&] {
          arena.execute([&] {
            tbb::task_group g;
            g.run([&] { sink.fetch_add(1, std::memory_order_relaxed); });
            g.run([&] { sink.fetch_add(1, std::memory_order_relaxed); });
            g.wait();
          });
        },
        options);
  }

  // 2. Handing 256 tiles of 4 KiB from a producer to a consumer: cube block writes a tile and
  //    sets a flag, vector block waits for it and sums it; vs a TBB producer task pushing tile
  //    indices through a concurrent_bounded_queue to a consumer task.
  {
    constexpr int kTiles = 256, kTileInts = 1024;
    auto chip = make_chip(1, 1);
    tbb::task_arena arena(2);
    std::vector<int> tiles(std::size_t(kTiles) * kTileInts);
    std::atomic<long> checksum{0};
    auto produce = [&](int t) {
      int* tile = tiles.data() + std::size_t(t) * kTileInts;
      for (int i = 0; i < kTileInts; ++i) tile[i] = t + i;
    };
    auto consume = [&](int t) {
      const int* tile = tiles.data() + std::size_t(t) * kTileInts;
      long sum = 0;
      for (int i = 0; i < kTileInts; ++i) sum += tile[i];
      checksum.fetch_add(sum, std::memory_order_relaxed);
    };
    hp::bench::Options handoff = options;
    handoff.batch = std::max<std::int64_t>(1, options.batch / 20);
    hp::bench::compare(
        "handoff, 256 tiles of 4 KiB (per launch)",
        [&] {
          check(chip->launch({.mode = LaunchMode::kMix, .block_dim = 1}, [&](BlockContext& ctx) {
            for (int t = 0; t < kTiles; ++t) {
              if (ctx.core_type() == CoreType::kCube) {
                produce(t);
                HP_RETURN_IF_ERROR(ctx.set_flag(0));
              } else {
                HP_RETURN_IF_ERROR(ctx.wait_flag(0, std::uint32_t(t + 1)));
                consume(t);
              }
            }
            return Status::ok();
          }));
        },
        "tbb::concurrent_bounded_queue",
        [&] {
          arena.execute([&] {
            tbb::concurrent_bounded_queue<int> queue;
            tbb::task_group g;
            g.run([&] {
              for (int t = 0; t < kTiles; ++t) {
                produce(t);
                queue.push(t);
              }
            });
            g.run([&] {
              for (int t = 0; t < kTiles; ++t) {
                int got = 0;
                queue.pop(got);
                consume(got);
              }
            });
            g.wait();
          });
        },
        handoff);
  }
  return 0;
}
