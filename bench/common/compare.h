// Interleaved A/B timing against a named peer: rounds alternate A, B, A, B ... so that the
// machine's noise hits both alike; each sample is the mean time of one operation over a batch;
// the report gives both medians and their ratio.
#ifndef HYPER_PARALLEL_BENCH_COMMON_COMPARE_H_
#define HYPER_PARALLEL_BENCH_COMMON_COMPARE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hp::bench {

struct Options {
  int rounds = 15;           // samples of each side
  std::int64_t batch = 200;  // operations per sample
};

// `--quick` (used by the smoke test) shrinks every benchmark to a few operations.
inline Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") o = Options{.rounds = 3, .batch = 5};
  }
  return o;
}

template <typename F>
double seconds_per_op(F& op, std::int64_t batch) {
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < batch; ++i) op();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / batch;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Prints "<what>  ours: X us  <peer>: Y us  ours/peer: R" and returns the ratio.
template <typename A, typename B>
double compare(const char* what, A ours, const char* peer_name, B peer, const Options& o) {
  ours();  // warm up both sides once
  peer();
  std::vector<double> a, b;
  for (int r = 0; r < o.rounds; ++r) {
    a.push_back(seconds_per_op(ours, o.batch));
    b.push_back(seconds_per_op(peer, o.batch));
  }
  const double ma = median(a), mb = median(b);
  std::printf("%-44s hp: %9.2f us   %s: %9.2f us   hp/peer: %5.2f\n", what, ma * 1e6, peer_name,
              mb * 1e6, ma / mb);
  std::fflush(stdout);
  return ma / mb;
}

}  // namespace hp::bench

#endif  // HYPER_PARALLEL_BENCH_COMMON_COMPARE_H_
