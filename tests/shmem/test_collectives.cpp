// Collectives against goldens computed locally: on the world team, on the even and odd PEs at
// the same time (strided sub-teams), and on a one-PE team; sizes from 1 byte / 1 element to
// about 1 MiB; every dtype x op of the reductions; in-place forms; calls back to back with no
// barrier in between; errors; the reductions with a caller's combine (product, xor, a
// non-commutative fold, odd and oversized elements). As a threads job of 2 and 4 PEs, and under
// hprun -n 2 / -n 4.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "scenario.h"

namespace hp::shmem {
namespace {

using testing::run_scenario;
using testing::strided;

constexpr std::size_t kMiB = std::size_t(1) << 20;
constexpr std::size_t kCanary = 64;  // bytes after a result that must stay untouched
constexpr unsigned char kCanaryByte = 0xEE;

// Deterministic data: a hash of (world PE, index, salt).
std::uint32_t mix(int pe, std::size_t i, int salt) {
  std::uint64_t x = std::uint64_t(pe) * 0x9E3779B97F4A7C15ull ^
                    std::uint64_t(i) * 0xC2B2AE3D27D4EB4Full ^
                    std::uint64_t(salt) * 0x165667B19E3779F9ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return std::uint32_t(x);
}

unsigned char byte_of(int pe, std::size_t i, int salt) {
  return static_cast<unsigned char>(mix(pe, i, salt));
}

// Symmetric source and dest buffers big enough for every case: n blocks of 1 MiB (plus canary).
struct Buffers {
  unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  std::size_t bytes = 0;

  Status allocate() {
    bytes = std::size_t(std::max(n_pes(), 4)) * kMiB + kCanary;
    void* a = nullptr;
    void* b = nullptr;
    HP_RETURN_IF_ERROR(malloc(bytes, &a));
    HP_RETURN_IF_ERROR(malloc(bytes, &b));
    src = static_cast<unsigned char*>(a);
    dst = static_cast<unsigned char*>(b);
    return Status::ok();
  }
  Status release() {
    HP_RETURN_IF_ERROR(free(dst));
    return free(src);
  }
  // dest gets `bytes` of result: poison them and the canary after them.
  void poison(std::size_t result_bytes) const { std::memset(dst, 0xA5, result_bytes + kCanary); }
  bool canary_intact(std::size_t result_bytes) const {
    return std::all_of(dst + result_bytes, dst + result_bytes + kCanary,
                       [](unsigned char c) { return c == kCanaryByte; });
  }
  void set_canary(std::size_t result_bytes) const {
    std::memset(dst + result_bytes, kCanaryByte, kCanary);
  }
};

// A team of this PE and its members as world PEs (team order).
using TeamBody = std::function<Status(Team, const std::vector<int>&)>;

// Runs body on each team of this PE: the world; the evens or the odds (both at once, on
// disjoint PEs); the last PE alone (the others skip it). Collective over the world.
Status for_each_team(const TeamBody& body) {
  const int me = my_pe(), n = n_pes();
  HP_EXPECT_OK(body(kTeamWorld, strided(0, 1, n)));
  Team evens = kTeamInvalid, odds = kTeamInvalid;
  HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, 2, (n + 1) / 2, &evens));
  HP_EXPECT_OK(team_split_strided(kTeamWorld, 1, 2, n / 2, &odds));
  if (me % 2 == 0) {
    HP_EXPECT_OK(body(evens, strided(0, 2, (n + 1) / 2)));
    HP_EXPECT_OK(team_destroy(evens));
  } else {
    HP_EXPECT_OK(body(odds, strided(1, 2, n / 2)));
    HP_EXPECT_OK(team_destroy(odds));
  }
  Team last = kTeamInvalid;
  HP_EXPECT_OK(team_split_strided(kTeamWorld, n - 1, 1, 1, &last));
  if (last != kTeamInvalid) {
    HP_EXPECT_OK(body(last, {me}));
    HP_EXPECT_OK(team_destroy(last));
  }
  return Status::ok();
}

// First mismatch of `got` against `want(i)` for i < count, as a failure message; empty if none.
template <typename T, typename Want>
std::string first_mismatch(const T* got, std::size_t count, Want&& want) {
  for (std::size_t i = 0; i < count; ++i) {
    const T w = want(i);
    if (!(got[i] == w)) {
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": got " +
             std::to_string(+got[i]) + ", want " + std::to_string(+w);
    }
  }
  return {};
}

#define HP_EXPECT_MATCH(got, count, want, what)                                  \
  do {                                                                           \
    const std::string hp_m_ = first_mismatch((got), (count), (want));            \
    EXPECT_TRUE(hp_m_.empty()) << what << ": " << hp_m_;                         \
    if (!hp_m_.empty()) return Status::error(ErrorCode::kInternal, "{}", hp_m_); \
  } while (0)

const std::size_t kByteSizes[] = {1, 3, 4099, kMiB};

using BufferBody = std::function<Status(Buffers&, Team, const std::vector<int>&)>;

// Allocates the buffers, runs body on each team of this PE (see for_each_team), frees them.
Status with_buffers_on_every_team(const BufferBody& body) {
  Buffers buf;
  HP_EXPECT_OK(buf.allocate());
  HP_RETURN_IF_ERROR(for_each_team(
      [&](Team team, const std::vector<int>& members) { return body(buf, team, members); }));
  return buf.release();
}

// One case of a byte collective: this PE's source gets src_bytes of byte_of(me, i, salt), the
// result_bytes of dest are poisoned and followed by a canary; then run() and the result
// against want(i) (byte i of dest).
template <typename Run, typename Want>
Status byte_case(Buffers& buf, std::size_t src_bytes, std::size_t result_bytes, int salt, Run&& run,
                 Want&& want, const std::string& what) {
  for (std::size_t i = 0; i < src_bytes; ++i) buf.src[i] = byte_of(my_pe(), i, salt);
  buf.poison(result_bytes);
  buf.set_canary(result_bytes);
  HP_EXPECT_OK(run());
  HP_EXPECT_MATCH(buf.dst, result_bytes, want, what);
  EXPECT_TRUE(buf.canary_intact(result_bytes)) << what << " wrote past dest";
  return Status::ok();
}

std::size_t index_in(const std::vector<int>& members, int pe) {
  return std::size_t(std::find(members.begin(), members.end(), pe) - members.begin());
}

// ---- broadcast, fcollect, collect, alltoall -----------------------------------------------------

TEST(ShmemCollectives, BroadcastFromEveryRoot) {
  run_scenario([] {
    int salt = 0;
    return with_buffers_on_every_team(
        [&](Buffers& buf, Team team, const std::vector<int>& members) {
          const int n = int(members.size());
          for (std::size_t bytes : kByteSizes) {
            for (int root = 0; root < n; ++root) {
              HP_RETURN_IF_ERROR(byte_case(
                  buf, bytes, bytes, ++salt,
                  [&] { return broadcast(team, buf.dst, buf.src, bytes, root); },
                  [&](std::size_t i) { return byte_of(members[root], i, salt); },
                  fmt::format("broadcast of {} bytes from root {}", bytes, root)));
            }
          }
          // In place (dest == source): every member ends with the root's data.
          for (int root = 0; root < n; ++root) {
            ++salt;
            const std::size_t bytes = 4099;
            for (std::size_t i = 0; i < bytes; ++i) buf.src[i] = byte_of(my_pe(), i, salt);
            HP_EXPECT_OK(broadcast(team, buf.src, buf.src, bytes, root));
            HP_EXPECT_MATCH(
                buf.src, bytes, [&](std::size_t i) { return byte_of(members[root], i, salt); },
                "in-place broadcast from root " << root);
          }
          return Status::ok();
        });
  });
}

TEST(ShmemCollectives, Fcollect) {
  run_scenario([] {
    int salt = 100;
    return with_buffers_on_every_team(
        [&](Buffers& buf, Team team, const std::vector<int>& members) {
          for (std::size_t bytes : kByteSizes) {
            HP_RETURN_IF_ERROR(byte_case(
                buf, bytes, members.size() * bytes, ++salt,
                [&] { return fcollect(team, buf.dst, buf.src, bytes); },
                [&](std::size_t i) { return byte_of(members[i / bytes], i % bytes, salt); },
                fmt::format("fcollect of {} bytes", bytes)));
          }
          return Status::ok();
        });
  });
}

// Team PE j gives bytes_of(j) bytes (0 for some); dest holds them in team order. Also in place.
TEST(ShmemCollectives, Collect) {
  run_scenario([] {
    int salt = 150;
    return with_buffers_on_every_team([&](Buffers& buf, Team team,
                                          const std::vector<int>& members) {
      const auto bytes_of = [](std::size_t j, std::size_t base) { return (j % 3) * base; };
      for (std::size_t base : {std::size_t(1), std::size_t(4099)}) {
        std::vector<std::size_t> offsets(members.size() + 1, 0);  // team PE j's first byte
        for (std::size_t j = 0; j < members.size(); ++j)
          offsets[j + 1] = offsets[j] + bytes_of(j, base);
        const std::size_t mine = bytes_of(std::size_t(team_my_pe(team)), base);
        const auto want = [&](std::size_t i) {
          const std::size_t j = std::size_t(std::upper_bound(offsets.begin(), offsets.end(), i) -
                                            offsets.begin() - 1);
          return byte_of(members[j], i - offsets[j], salt);
        };
        HP_RETURN_IF_ERROR(byte_case(
            buf, mine, offsets.back(), ++salt,
            [&] { return collect(team, buf.dst, buf.src, mine); }, want,
            fmt::format("collect of {} bytes per unit", base)));
        for (std::size_t i = 0; i < mine; ++i) buf.src[i] = byte_of(my_pe(), i, salt);
        HP_EXPECT_OK(collect(team, buf.src, buf.src, mine));
        HP_EXPECT_MATCH(buf.src, offsets.back(), want, "in-place collect, unit " << base);
      }
      return Status::ok();
    });
  });
}

// Team PE i's source holds byte_of(world PE of i, k, salt) at byte k; block j goes to PE j.
TEST(ShmemCollectives, Alltoall) {
  run_scenario([] {
    int salt = 200;
    return with_buffers_on_every_team(
        [&](Buffers& buf, Team team, const std::vector<int>& members) {
          const std::size_t n = members.size(), mine = index_in(members, my_pe());
          for (std::size_t bytes : kByteSizes) {
            HP_RETURN_IF_ERROR(byte_case(
                buf, n * bytes, n * bytes, ++salt,
                [&] { return alltoall(team, buf.dst, buf.src, bytes); },
                [&](std::size_t i) {
                  return byte_of(members[i / bytes], mine * bytes + i % bytes, salt);
                },
                fmt::format("alltoall of {} bytes per PE", bytes)));
          }
          return Status::ok();
        });
  });
}

// ---- reductions ---------------------------------------------------------------------------------

// Reference bf16 rounding, written differently from the library's: the nearer of the two
// bf16 neighbours of f, the one with an even last bit on a tie.
std::uint16_t ref_bf16(float f) {
  const std::uint16_t lo = std::uint16_t(std::bit_cast<std::uint32_t>(f) >> 16);  // toward zero
  const float down = std::bit_cast<float>(std::uint32_t(lo) << 16);
  const float up = std::bit_cast<float>(std::uint32_t(lo + 1) << 16);
  const double to_down = std::fabs(double(f) - double(down));
  const double to_up = std::fabs(double(up) - double(f));
  if (to_down != to_up) return to_down < to_up ? lo : std::uint16_t(lo + 1);
  return (lo & 1) ? std::uint16_t(lo + 1) : lo;
}

// Element kinds: storage S, dtype, generated values (whose sums over <= 4 PEs are exact in
// double), and the conversions to and from double for the reference.
struct I32 {
  using S = std::int32_t;
  static constexpr DType kType = DType::kInt32;
  static S make(std::uint32_t h) { return S(h & 0x1FFFFF) - 0x100000; }
  static double value(S s) { return s; }
  static S from(double d) { return S(d); }
};
struct I64 {
  using S = std::int64_t;
  static constexpr DType kType = DType::kInt64;
  static S make(std::uint32_t h) { return std::int64_t(std::int32_t(h)) * 65536 + (h >> 16); }
  static double value(S s) { return double(s); }
  static S from(double d) { return S(d); }
};
struct F32 {
  using S = float;
  static constexpr DType kType = DType::kFP32;
  static S make(std::uint32_t h) { return float(int(h % 16384) - 8192) * 0.25f; }
  static double value(S s) { return s; }
  static S from(double d) { return float(d); }
};
struct F64 {
  using S = double;
  static constexpr DType kType = DType::kFP64;
  static S make(std::uint32_t h) { return double(int(h % 1048576) - 524288) * 0.125; }
  static double value(S s) { return s; }
  static S from(double d) { return d; }
};
struct BF16 {
  using S = std::uint16_t;
  static constexpr DType kType = DType::kBF16;
  // 8 significant bits, exponents -4..4, either sign: exact in bf16; sums of 4 exact in fp32.
  static S make(std::uint32_t h) {
    const float f = std::ldexp(1.0f + float(h & 0x7F) / 128.0f, int((h >> 7) % 9) - 4) *
                    ((h >> 12) & 1 ? -1.0f : 1.0f);
    return S(std::bit_cast<std::uint32_t>(f) >> 16);
  }
  static double value(S s) { return std::bit_cast<float>(std::uint32_t(s) << 16); }
  static S from(double d) { return ref_bf16(float(d)); }  // d is exact in fp32
};

double ref_combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kMin:
      return std::min(a, b);
  }
  return 0;
}

// The reduction over `members` of element `index` of their sources, as generated by `salt`.
template <typename E>
typename E::S golden(ReduceOp op, const std::vector<int>& members, std::size_t index, int salt) {
  double acc = E::value(E::make(mix(members[0], index, salt)));
  for (std::size_t j = 1; j < members.size(); ++j) {
    acc = ref_combine(op, acc, E::value(E::make(mix(members[j], index, salt))));
  }
  return E::from(acc);
}

const char* op_name(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : op == ReduceOp::kMax ? "max" : "min";
}

const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
// Crosses the library's accumulator chunk (2048 elements) both ways; 256 Ki x 4 bytes = 1 MiB.
const std::size_t kCounts[] = {1, 5, 2048, 2048 * 2 + 3, std::size_t(256) << 10};

template <typename E>
Status allreduce_case(Buffers& buf, Team team, const std::vector<int>& members, std::size_t count,
                      ReduceOp op, bool in_place, int salt) {
  using S = typename E::S;
  auto* src = reinterpret_cast<S*>(buf.src);
  auto* dst = in_place ? src : reinterpret_cast<S*>(buf.dst);
  for (std::size_t i = 0; i < count; ++i) src[i] = E::make(mix(my_pe(), i, salt));
  if (!in_place) {
    buf.poison(count * sizeof(S));
    buf.set_canary(count * sizeof(S));
  }
  HP_EXPECT_OK(allreduce(team, dst, src, count, E::kType, op));
  HP_EXPECT_MATCH(
      dst, count, [&](std::size_t i) { return golden<E>(op, members, i, salt); },
      "allreduce " << to_string(E::kType) << " " << op_name(op) << " of " << count
                   << (in_place ? " in place" : ""));
  if (!in_place) {
    EXPECT_TRUE(buf.canary_intact(count * sizeof(S))) << "allreduce wrote past dest";
  }
  return Status::ok();
}

// Source: team size blocks of count elements; element (b, i) is generated at index b*count + i.
template <typename E>
Status reduce_scatter_case(Buffers& buf, Team team, const std::vector<int>& members,
                           std::size_t count, ReduceOp op, bool in_place, int salt) {
  using S = typename E::S;
  const std::size_t n = members.size();
  const std::size_t mine = index_in(members, my_pe());
  auto* src = reinterpret_cast<S*>(buf.src);
  auto* dst = in_place ? src : reinterpret_cast<S*>(buf.dst);
  for (std::size_t i = 0; i < n * count; ++i) src[i] = E::make(mix(my_pe(), i, salt));
  if (!in_place) {
    buf.poison(count * sizeof(S));
    buf.set_canary(count * sizeof(S));
  }
  HP_EXPECT_OK(reduce_scatter(team, dst, src, count, E::kType, op));
  HP_EXPECT_MATCH(
      dst, count, [&](std::size_t i) { return golden<E>(op, members, mine * count + i, salt); },
      "reduce_scatter " << to_string(E::kType) << " " << op_name(op) << " of " << count << " per PE"
                        << (in_place ? " in place" : ""));
  if (!in_place) {
    EXPECT_TRUE(buf.canary_intact(count * sizeof(S))) << "reduce_scatter wrote past dest";
  }
  return Status::ok();
}

template <typename E>
Status reductions_of(Buffers& buf, Team team, const std::vector<int>& members, int* salt) {
  for (ReduceOp op : kOps) {
    for (std::size_t count : kCounts) {
      HP_RETURN_IF_ERROR(allreduce_case<E>(buf, team, members, count, op, false, ++*salt));
      // reduce_scatter: n blocks of count / 4 (so the source stays near 1 MiB per PE).
      const std::size_t per_pe = std::max<std::size_t>(1, count / 4);
      HP_RETURN_IF_ERROR(reduce_scatter_case<E>(buf, team, members, per_pe, op, false, ++*salt));
    }
    HP_RETURN_IF_ERROR(allreduce_case<E>(buf, team, members, 4099, op, true, ++*salt));
    HP_RETURN_IF_ERROR(allreduce_case<E>(buf, team, members, 1, op, true, ++*salt));
    HP_RETURN_IF_ERROR(reduce_scatter_case<E>(buf, team, members, 2051, op, true, ++*salt));
  }
  return Status::ok();
}

TEST(ShmemCollectives, AllreduceAndReduceScatterEveryDtypeAndOp) {
  run_scenario([] {
    int salt = 1000;
    return with_buffers_on_every_team(
        [&](Buffers& buf, Team team, const std::vector<int>& members) {
          HP_RETURN_IF_ERROR(reductions_of<I32>(buf, team, members, &salt));
          HP_RETURN_IF_ERROR(reductions_of<I64>(buf, team, members, &salt));
          HP_RETURN_IF_ERROR(reductions_of<F32>(buf, team, members, &salt));
          HP_RETURN_IF_ERROR(reductions_of<F64>(buf, team, members, &salt));
          return reductions_of<BF16>(buf, team, members, &salt);
        });
  });
}

// bf16 sums accumulate in fp32 and round to nearest even once at the end. Element k gets
// first[k] from PE 0, second[k] from PE 1 and rest[k] from the others; all are bf16 values.
TEST(ShmemCollectives, Bf16SumRoundsOnceToNearestEven) {
  run_scenario([] {
    const int me = my_pe(), n = n_pes();
    const float u = std::ldexp(1.0f, -7);  // the ulp of bf16 at 1
    struct Case {
      float first, second, rest, want2, want4;  // want2 / want4: the sum on 2 / 4 PEs
    };
    const Case cases[] = {
        {1 + u, 1 + u, 1 + u, 2 * (1 + u), 4 * (1 + u)},  // exact
        {1, u / 4, u / 4, 1, 1 + u},                      // per-step rounding would give 1
        {1, u / 2, 0, 1, 1},                              // a tie: to even (1)
        {1 + u, u / 2, 0, 1 + 2 * u, 1 + 2 * u},          // a tie: to even (1 + 2u)
        {1, 0.75f * u, 0.75f * u, 1 + u, 1 + 2 * u},      // 1 + 0.75u, 1 + 2.25u
        {-1, -u / 2, 0, -1, -1},                          // negative tie
    };
    constexpr std::size_t kCases = std::size(cases);
    void* raw = nullptr;
    HP_EXPECT_OK(malloc(kCases * sizeof(std::uint16_t), &raw));
    auto* v = static_cast<std::uint16_t*>(raw);
    auto bf = [](float f) { return std::uint16_t(std::bit_cast<std::uint32_t>(f) >> 16); };
    for (std::size_t k = 0; k < kCases; ++k) {
      const float x = me == 0 ? cases[k].first : me == 1 ? cases[k].second : cases[k].rest;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(x) & 0xFFFF, 0u)
          << "case " << k << " is not a bf16 value";
      v[k] = bf(x);
    }
    HP_EXPECT_OK(allreduce(kTeamWorld, v, v, kCases, DType::kBF16, ReduceOp::kSum));
    for (std::size_t k = 0; k < kCases; ++k) {
      const Case& c = cases[k];
      const float exact = c.first + c.second + float(n - 2) * c.rest;  // exact in fp32
      EXPECT_EQ(v[k], ref_bf16(exact)) << "case " << k;
      if (n == 2 || n == 4) {
        EXPECT_EQ(v[k], bf(n == 2 ? c.want2 : c.want4)) << "case " << k;
      }
    }
    return free(raw);
  });
}

// Calls back to back with no barrier between them: each call's sources are rewritten as soon
// as the previous call returns, and two buffers swap roles (A -> B, then B -> A).
TEST(ShmemCollectives, BackToBackCallsDoNotRace) {
  run_scenario([] {
    const int me = my_pe(), n = n_pes();
    constexpr std::size_t kCount = 4096 + 17;
    void* raw_a = nullptr;
    void* raw_b = nullptr;
    HP_EXPECT_OK(malloc(std::size_t(n) * kCount * sizeof(std::int64_t), &raw_a));
    HP_EXPECT_OK(malloc(std::size_t(n) * kCount * sizeof(std::int64_t), &raw_b));
    auto* a = static_cast<std::int64_t*>(raw_a);
    auto* b = static_cast<std::int64_t*>(raw_b);
    const std::vector<int> world = strided(0, 1, n);
    for (int round = 0; round < 60; ++round) {
      const int salt = 5000 + round;
      for (std::size_t i = 0; i < kCount; ++i) a[i] = I64::make(mix(me, i, salt));
      HP_EXPECT_OK(allreduce(kTeamWorld, b, a, kCount, DType::kInt64, ReduceOp::kSum));
      HP_EXPECT_MATCH(
          b, kCount, [&](std::size_t i) { return golden<I64>(ReduceOp::kSum, world, i, salt); },
          "allreduce A->B round " << round);
      // B -> A at once: A is read by the others' previous call only until its last barrier.
      HP_EXPECT_OK(allreduce(kTeamWorld, a, b, kCount, DType::kInt64, ReduceOp::kMax));
      HP_EXPECT_MATCH(
          a, kCount, [&](std::size_t i) { return golden<I64>(ReduceOp::kSum, world, i, salt); },
          "allreduce B->A round " << round);  // max of equal values
      for (std::size_t i = 0; i < kCount; ++i)
        a[i] = std::int64_t(me) << 32 | std::int64_t(i + round);
      HP_EXPECT_OK(fcollect(kTeamWorld, b, a, kCount * sizeof(std::int64_t)));
      HP_EXPECT_MATCH(
          b, std::size_t(n) * kCount,
          [&](std::size_t i) {
            return std::int64_t(i / kCount) << 32 | std::int64_t(i % kCount + round);
          },
          "fcollect round " << round);
      HP_EXPECT_OK(alltoall(kTeamWorld, a, b, kCount * sizeof(std::int64_t)));
      HP_EXPECT_MATCH(
          a, std::size_t(n) * kCount,
          [&](std::size_t i) { return std::int64_t(me) << 32 | std::int64_t(i % kCount + round); },
          "alltoall round " << round);
      HP_EXPECT_OK(broadcast(kTeamWorld, b, a, kCount * sizeof(std::int64_t), round % n));
      HP_EXPECT_MATCH(
          b, kCount,
          [&](std::size_t i) { return std::int64_t(round % n) << 32 | std::int64_t(i + round); },
          "broadcast round " << round);
    }
    HP_EXPECT_OK(free(raw_b));
    return free(raw_a);
  });
}

// ---- reductions with a caller's combine (allreduce_with, reduce_scatter_with) ------------------

// acc[i] = Op(acc[i], in[i]) over `count` elements of T; `user` goes to Op.
template <typename T, typename Op>
void combine_as(void* acc, const void* in, std::size_t count, void* user) {
  auto* a = static_cast<T*>(acc);
  const auto* b = static_cast<const T*>(in);
  for (std::size_t i = 0; i < count; ++i) a[i] = Op{}(a[i], b[i], user);
}

struct Product {
  template <typename T>
  T operator()(T a, T b, void*) const {
    return a * b;
  }
};
struct Xor {
  template <typename T>
  T operator()(T a, T b, void*) const {
    return a ^ b;
  }
};
// Not commutative: a left fold in team order gives (..((x0 m + x1) m + x2)..), m = *user.
struct Horner {
  std::uint64_t operator()(std::uint64_t a, std::uint64_t b, void* user) const {
    return a * *static_cast<const std::uint64_t*>(user) + b;
  }
};

// A 3-byte element: a little-endian 24-bit integer, added modulo 2^24 (carries cross its bytes,
// so the chunks must hold whole elements).
void add_u24(void* acc, const void* in, std::size_t count, void*) {
  auto* a = static_cast<unsigned char*>(acc);
  const auto* b = static_cast<const unsigned char*>(in);
  for (std::size_t e = 0; e < count; ++e, a += 3, b += 3) {
    std::uint32_t sum = 0;
    for (int k = 0; k < 3; ++k) sum += std::uint32_t(a[k] + b[k]) << (8 * k);
    for (int k = 0; k < 3; ++k) a[k] = static_cast<unsigned char>(sum >> (8 * k));
  }
}

void xor_bytes(void* acc, const void* in, std::size_t count, void* user) {
  const std::size_t bytes = count * *static_cast<const std::size_t*>(user);
  auto* a = static_cast<unsigned char*>(acc);
  const auto* b = static_cast<const unsigned char*>(in);
  for (std::size_t i = 0; i < bytes; ++i) a[i] ^= b[i];
}

// One case with elements of T: team PE j's element i is make(mix(world PE of j, index, salt));
// the result must be the left fold ref(acc, x, user) over the members in team order, bit for
// bit. scatter: reduce_scatter_with of count elements per PE, else allreduce_with.
template <typename T, typename Make, typename Op>
Status with_case(Buffers& buf, Team team, const std::vector<int>& members, std::size_t count,
                 bool scatter, bool in_place, int salt, ReduceFn combine, void* user, Make make,
                 Op ref, const std::string& what) {
  const std::size_t n = members.size(), mine = index_in(members, my_pe());
  const std::size_t first = scatter ? mine * count : 0;  // index of dest[0] in the sources
  auto* src = reinterpret_cast<T*>(buf.src);
  auto* dst = in_place ? src : reinterpret_cast<T*>(buf.dst);
  for (std::size_t i = 0; i < (scatter ? n : 1) * count; ++i)
    src[i] = T(make(mix(my_pe(), i, salt)));
  if (!in_place) {
    buf.poison(count * sizeof(T));
    buf.set_canary(count * sizeof(T));
  }
  HP_EXPECT_OK(scatter ? reduce_scatter_with(team, dst, src, count, sizeof(T), combine, user)
                       : allreduce_with(team, dst, src, count, sizeof(T), combine, user));
  auto want = [&](std::size_t i) {
    T acc = T(make(mix(members[0], first + i, salt)));
    for (std::size_t j = 1; j < n; ++j) {
      acc = ref(acc, T(make(mix(members[j], first + i, salt))), user);
    }
    return acc;
  };
  HP_EXPECT_MATCH(
      dst, count, want,
      what << " of " << count << (scatter ? " per PE" : "") << (in_place ? " in place" : ""));
  if (!in_place) {
    EXPECT_TRUE(buf.canary_intact(count * sizeof(T))) << what << " wrote past dest";
  }
  return Status::ok();
}

// Crosses the 16 KiB chunk of 8-byte elements (2048) both ways.
const std::size_t kWithCounts[] = {1, 5, 2047, 2049, 3 * 2048 + 1, 100000};

TEST(ShmemCollectives, ReductionsWithACallersCombine) {
  run_scenario([] {
    int salt = 7000;
    std::uint64_t multiplier = 1000003;
    return with_buffers_on_every_team(
        [&](Buffers& buf, Team team, const std::vector<int>& members) {
          const auto u64 = [](std::uint32_t h) { return std::uint64_t(h) * 0x9E3779B97F4A7C15ull; };
          const auto u32 = [](std::uint32_t h) { return h; };
          const auto near_one = [](std::uint32_t h) { return 0.5 + double(h % 10001) / 1e4; };
          for (bool scatter : {false, true}) {
            for (std::size_t count : kWithCounts) {
              if (scatter && count > 20000) continue;  // n blocks must fit the buffers
              for (bool in_place : {false, true}) {
                HP_RETURN_IF_ERROR(with_case<std::uint64_t>(
                    buf, team, members, count, scatter, in_place, ++salt,
                    &combine_as<std::uint64_t, Product>, nullptr, u64, Product{}, "u64 product"));
                HP_RETURN_IF_ERROR(with_case<double>(buf, team, members, count, scatter, in_place,
                                                     ++salt, &combine_as<double, Product>, nullptr,
                                                     near_one, Product{}, "f64 product"));
                HP_RETURN_IF_ERROR(with_case<std::uint32_t>(
                    buf, team, members, count, scatter, in_place, ++salt,
                    &combine_as<std::uint32_t, Xor>, nullptr, u32, Xor{}, "u32 xor"));
                HP_RETURN_IF_ERROR(
                    with_case<std::uint64_t>(buf, team, members, count, scatter, in_place, ++salt,
                                             &combine_as<std::uint64_t, Horner>, &multiplier, u64,
                                             Horner{}, "team-order Horner fold"));
              }
            }
          }
          // 3-byte elements, across chunk boundaries (5462 elements fill one 16 KiB chunk).
          for (std::size_t count : {std::size_t(1), std::size_t(5462), std::size_t(5463 * 3)}) {
            const std::size_t bytes = 3 * count;
            HP_RETURN_IF_ERROR(byte_case(
                buf, bytes, bytes, ++salt,
                [&] { return allreduce_with(team, buf.dst, buf.src, count, 3, &add_u24, nullptr); },
                [&](std::size_t i) {
                  const std::size_t e = i / 3;
                  std::uint32_t sum = 0;
                  for (int pe : members) {
                    std::uint32_t x = 0;
                    for (int k = 0; k < 3; ++k) {
                      x |= std::uint32_t(byte_of(pe, 3 * e + std::size_t(k), salt)) << (8 * k);
                    }
                    sum += x;
                  }
                  return static_cast<unsigned char>(sum >> (8 * (i % 3)));
                },
                fmt::format("allreduce_with of {} 3-byte elements", count)));
          }
          // Elements bigger than a chunk: one element per chunk.
          std::size_t big = 20000;
          HP_RETURN_IF_ERROR(byte_case(
              buf, 3 * big, 3 * big, ++salt,
              [&] { return allreduce_with(team, buf.dst, buf.src, 3, big, &xor_bytes, &big); },
              [&](std::size_t i) {
                unsigned char x = 0;
                for (int pe : members) x ^= byte_of(pe, i, salt);
                return x;
              },
              "allreduce_with of 3 elements of 20000 bytes"));
          return Status::ok();
        });
  });
}

TEST(ShmemCollectives, ReductionsWithACallersCombineErrors) {
  run_scenario([] {
    const int n = n_pes();
    void* raw_a = nullptr;
    void* raw_b = nullptr;
    HP_EXPECT_OK(malloc(4096, &raw_a));
    HP_EXPECT_OK(malloc(4096, &raw_b));
    auto* src = static_cast<std::uint32_t*>(raw_a);
    auto* dst = static_cast<std::uint32_t*>(raw_b);
    std::uint32_t local[4] = {};
    const ReduceFn x = &combine_as<std::uint32_t, Xor>;
    EXPECT_EQ(allreduce_with(kTeamWorld, dst, src, 4, 0, x, nullptr).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(reduce_scatter_with(kTeamWorld, dst, src, 1, 4, nullptr, nullptr).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(allreduce_with(kTeamWorld, local, src, 4, 4, x, nullptr).code(),
              ErrorCode::kNotSymmetric);
    EXPECT_EQ(reduce_scatter_with(kTeamWorld, dst, local, 1, 4, x, nullptr).code(),
              ErrorCode::kNotSymmetric);
    EXPECT_EQ(
        allreduce_with(kTeamWorld, dst, src, std::numeric_limits<std::size_t>::max(), 4, x, nullptr)
            .code(),
        ErrorCode::kInvalidArgument);
    EXPECT_EQ(allreduce_with(kTeamInvalid, dst, src, 1, 4, x, nullptr).code(),
              ErrorCode::kInvalidArgument);
    HP_EXPECT_OK(allreduce_with(kTeamWorld, nullptr, nullptr, 0, 4, x, nullptr));
    // Still in step: a real one.
    src[0] = 1u << my_pe();
    HP_EXPECT_OK(allreduce_with(kTeamWorld, dst, src, 1, 4, x, nullptr));
    EXPECT_EQ(dst[0], (1u << n) - 1);
    HP_EXPECT_OK(free(raw_b));
    return free(raw_a);
  });
}

// ---- errors -------------------------------------------------------------------------------------

TEST(ShmemCollectives, ErrorsAreNamed) {
  run_scenario([] {
    const int me = my_pe(), n = n_pes();
    void* raw_a = nullptr;
    void* raw_b = nullptr;
    HP_EXPECT_OK(malloc(4096, &raw_a));
    HP_EXPECT_OK(malloc(4096, &raw_b));
    auto* src = static_cast<std::int32_t*>(raw_a);
    auto* dst = static_cast<std::int32_t*>(raw_b);
    std::int32_t local[16] = {};

    // Bad root.
    for (int root : {-1, n, 1000}) {
      Status s = broadcast(kTeamWorld, dst, src, 8, root);
      EXPECT_EQ(s.code(), ErrorCode::kOutOfRange) << root;
      EXPECT_NE(s.message().find("root"), std::string::npos) << s.message();
    }
    // Buffers outside the symmetric heap, or running past its end.
    EXPECT_EQ(broadcast(kTeamWorld, local, src, 8, 0).code(), ErrorCode::kNotSymmetric);
    EXPECT_EQ(broadcast(kTeamWorld, dst, local, 8, 0).code(), ErrorCode::kNotSymmetric);
    EXPECT_EQ(fcollect(kTeamWorld, local, src, 4).code(), ErrorCode::kNotSymmetric);
    EXPECT_EQ(alltoall(kTeamWorld, dst, local, 4).code(), ErrorCode::kNotSymmetric);
    EXPECT_EQ(allreduce(kTeamWorld, local, src, 4, DType::kInt32, ReduceOp::kSum).code(),
              ErrorCode::kNotSymmetric);
    EXPECT_EQ(reduce_scatter(kTeamWorld, dst, local, 4, DType::kInt32, ReduceOp::kSum).code(),
              ErrorCode::kNotSymmetric);
    // n blocks of heap_size() / 2 run past the heap's end: the whole range is checked.
    Status whole = alltoall(kTeamWorld, dst, src, heap_size() / 2);
    EXPECT_EQ(whole.code(), ErrorCode::kNotSymmetric) << whole.to_string();
    EXPECT_EQ(fcollect(kTeamWorld, dst, src, heap_size() / 2).code(), ErrorCode::kNotSymmetric);
    // Sizes that overflow.
    const std::size_t huge = std::numeric_limits<std::size_t>::max() / std::size_t(n) + 1;
    EXPECT_EQ(alltoall(kTeamWorld, dst, src, huge).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(fcollect(kTeamWorld, dst, src, huge).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(allreduce(kTeamWorld, dst, src, std::numeric_limits<std::size_t>::max(),
                        DType::kInt32, ReduceOp::kSum)
                  .code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(reduce_scatter(kTeamWorld, dst, src, huge, DType::kInt64, ReduceOp::kSum).code(),
              ErrorCode::kInvalidArgument);
    // Unsupported dtypes and ops.
    for (DType dtype : {DType::kInt8, DType::kUInt8, DType::kFP16}) {
      Status s = allreduce(kTeamWorld, dst, src, 4, dtype, ReduceOp::kSum);
      EXPECT_EQ(s.code(), ErrorCode::kDTypeMismatch) << to_string(dtype);
      EXPECT_NE(s.message().find(std::string(to_string(dtype))), std::string::npos) << s.message();
      EXPECT_EQ(reduce_scatter(kTeamWorld, dst, src, 1, dtype, ReduceOp::kMax).code(),
                ErrorCode::kDTypeMismatch);
    }
    EXPECT_EQ(allreduce(kTeamWorld, dst, src, 4, DType(99), ReduceOp::kSum).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(allreduce(kTeamWorld, dst, src, 4, DType::kInt32, ReduceOp(3)).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(reduce_scatter(kTeamWorld, dst, src, 1, DType::kFP32, ReduceOp(-1)).code(),
              ErrorCode::kInvalidArgument);
    // Reductions need element-aligned buffers.
    auto* odd = reinterpret_cast<std::int32_t*>(reinterpret_cast<char*>(src) + 2);
    EXPECT_EQ(allreduce(kTeamWorld, dst, odd, 4, DType::kInt32, ReduceOp::kSum).code(),
              ErrorCode::kMisaligned);
    EXPECT_EQ(reduce_scatter(kTeamWorld, odd, src, 1, DType::kInt64, ReduceOp::kMin).code(),
              ErrorCode::kMisaligned);
    // Teams: invalid, destroyed, and a live team this PE is not in.
    auto all_fail_on = [&](Team team, const char* what) {
      EXPECT_EQ(broadcast(team, dst, src, 4, 0).code(), ErrorCode::kInvalidArgument) << what;
      EXPECT_EQ(fcollect(team, dst, src, 4).code(), ErrorCode::kInvalidArgument) << what;
      EXPECT_EQ(alltoall(team, dst, src, 4).code(), ErrorCode::kInvalidArgument) << what;
      EXPECT_EQ(allreduce(team, dst, src, 1, DType::kInt32, ReduceOp::kSum).code(),
                ErrorCode::kInvalidArgument)
          << what;
      EXPECT_EQ(reduce_scatter(team, dst, src, 1, DType::kInt32, ReduceOp::kSum).code(),
                ErrorCode::kInvalidArgument)
          << what;
    };
    all_fail_on(kTeamInvalid, "kTeamInvalid");
    all_fail_on(77, "handle 77");
    Team gone = kTeamInvalid;
    HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, 1, n, &gone));
    HP_EXPECT_OK(team_destroy(gone));
    all_fail_on(gone, "a destroyed team");
    Team first = kTeamInvalid;
    HP_EXPECT_OK(team_split_strided(kTeamWorld, 0, 1, 1, &first));  // PE 0 alone
    if (me == 0) {
      for (int pe = 1; pe < n; ++pe) HP_EXPECT_OK(p(dst, std::int32_t(first), pe));
    }
    HP_EXPECT_OK(barrier_all());
    if (me != 0) all_fail_on(Team(dst[0]), "a team of PE 0 alone");
    HP_EXPECT_OK(barrier_all());  // PE 0 reuses dst below
    if (first != kTeamInvalid) HP_EXPECT_OK(team_destroy(first));
    // Nothing to move: OK without touching the (null) buffers.
    HP_EXPECT_OK(broadcast(kTeamWorld, nullptr, nullptr, 0, 0));
    HP_EXPECT_OK(fcollect(kTeamWorld, nullptr, nullptr, 0));
    HP_EXPECT_OK(alltoall(kTeamWorld, nullptr, nullptr, 0));
    HP_EXPECT_OK(allreduce(kTeamWorld, nullptr, nullptr, 0, DType::kFP32, ReduceOp::kMax));
    HP_EXPECT_OK(reduce_scatter(kTeamWorld, nullptr, nullptr, 0, DType::kBF16, ReduceOp::kSum));
    // After all these errors the PEs are still in step: a real collective works.
    src[0] = me + 1;
    HP_EXPECT_OK(allreduce(kTeamWorld, dst, src, 1, DType::kInt32, ReduceOp::kSum));
    EXPECT_EQ(dst[0], n * (n + 1) / 2);
    HP_EXPECT_OK(free(raw_b));
    return free(raw_a);
  });
}

}  // namespace
}  // namespace hp::shmem

int main(int argc, char** argv) { return hp::shmem::testing::scenario_main(argc, argv); }
