#include "moe/buffer_config.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "shmem/shmem.h"

namespace hp::moe {
namespace {

constexpr int kFields = 13;  // the BufferConfig fields every rank must agree on

// (Collective.) Every rank's config fields into *table ([R x kFields]) and, for each rank, the
// first rank whose heap it cannot map, or -1, into *unmapped ([R]).
Status gather_configs(const BufferConfig& config, int ranks, std::vector<std::int64_t>* table,
                      std::vector<std::int64_t>* unmapped) {
  // Every rank checks every rank's config (the same data everywhere: the same verdict), and
  // whether it maps every peer's heap (the window context and the pull dispatch need that).
  const std::array<std::int64_t, kFields> mine = {
      config.hidden,
      config.max_tokens_per_rank,
      config.num_experts,
      config.topk,
      config.max_element_bytes,
      config.combine_element_bytes,
      std::int64_t(config.comm),
      std::int64_t(config.low_latency),
      std::bit_cast<std::int64_t>(config.capacity_factor),
      std::int64_t(config.grow_on_overflow),
      std::int64_t(config.streamed_combine),
      std::int64_t(config.zero_copy_combine),
      std::int64_t(config.dispatch_path)};
  void* scratch = nullptr;
  HP_RETURN_IF_ERROR(
      hp::shmem::calloc(std::size_t(ranks + 1) * kFields, sizeof(std::int64_t), &scratch));
  auto* all = static_cast<std::int64_t*>(scratch);
  std::memcpy(all + std::size_t(ranks) * kFields, mine.data(), sizeof(mine));
  Status s = hp::shmem::fcollect(hp::shmem::kTeamWorld, all, all + std::size_t(ranks) * kFields,
                                 sizeof(mine));
  table->assign(all, all + std::size_t(ranks) * kFields);
  // Whether this rank maps every peer's heap (scratch is symmetric), gathered into `all`: the
  // first rank r cannot map, or -1.
  if (s.is_ok()) {
    std::int64_t& first_unmapped = all[std::size_t(ranks) * kFields];  // this rank's contribution
    first_unmapped = -1;
    for (int pe = 0; pe < ranks && first_unmapped < 0; ++pe) {
      if (hp::shmem::ptr(scratch, pe) == nullptr) first_unmapped = pe;
    }
    s = hp::shmem::fcollect(hp::shmem::kTeamWorld, all, &first_unmapped, sizeof(std::int64_t));
    unmapped->assign(all, all + ranks);
  }
  HP_RETURN_IF_ERROR(hp::shmem::free(scratch));
  return s;
}

// INVALID_ARGUMENT naming the first field where a rank's config differs from rank 0's.
Status check_agreement(const std::vector<std::int64_t>& table) {
  static constexpr const char* kNames[] = {"hidden",
                                           "max_tokens_per_rank",
                                           "num_experts",
                                           "topk",
                                           "max_element_bytes",
                                           "combine_element_bytes",
                                           "comm",
                                           "low_latency",
                                           "capacity_factor",
                                           "grow_on_overflow",
                                           "streamed_combine",
                                           "zero_copy_combine",
                                           "dispatch_path"};
  static_assert(std::size(kNames) == kFields, "a name for every compared field");
  const int ranks = int(table.size() / kFields);
  for (int r = 1; r < ranks; ++r) {
    for (int f = 0; f < kFields; ++f) {
      if (table[std::size_t(r * kFields + f)] != table[std::size_t(f)]) {
        return Status::error(
            ErrorCode::kInvalidArgument,
            "Buffer::create: ranks disagree on {}: rank 0 has {}, rank {} has {} (every rank "
            "must pass the same BufferConfig)",
            kNames[f], table[std::size_t(f)], r, table[std::size_t(r * kFields + f)]);
      }
    }
  }
  return Status::ok();
}

Status check_ranges(const BufferConfig& config, int ranks) {
  if (config.hidden < 1 || config.hidden > kMaxHidden || config.max_tokens_per_rank < 0 ||
      config.max_tokens_per_rank > kMaxTokensPerRank || config.topk < 1 || config.topk > kMaxTopk ||
      config.num_experts < 1 || config.num_experts > kMaxExperts ||
      config.num_experts % ranks != 0) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "BufferConfig hidden = {}, max_tokens_per_rank = {}, topk = {}, num_experts = {}: expected "
        "hidden in [1, {}], max_tokens_per_rank in [0, {}], topk in [1, {}] and num_experts a "
        "multiple of the {} ranks in [1, {}]",
        config.hidden, config.max_tokens_per_rank, config.topk, config.num_experts, kMaxHidden,
        kMaxTokensPerRank, kMaxTopk, ranks, kMaxExperts);
  }
  if (config.max_element_bytes != 1 && config.max_element_bytes != 2 &&
      config.max_element_bytes != 4) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "BufferConfig max_element_bytes = {}: expected 1, 2 or 4",
                         config.max_element_bytes);
  }
  if (config.combine_element_bytes != 2 && config.combine_element_bytes != 4) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "BufferConfig combine_element_bytes = {}: expected 2 or 4",
                         config.combine_element_bytes);
  }
  if (!(config.capacity_factor == 0.0 ||
        (config.capacity_factor >= 1.0 && config.capacity_factor <= 1e6))) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "BufferConfig capacity_factor = {}: expected 0 (lossless) or a factor in [1, 1e6]",
        config.capacity_factor);
  }
  if (config.comm != CommKind::kWindow && config.comm != CommKind::kShmem) {
    return Status::error(ErrorCode::kInvalidArgument, "BufferConfig comm = {}: unknown",
                         int(config.comm));
  }
  if (config.dispatch_path != DispatchPath::kAuto && config.dispatch_path != DispatchPath::kPush &&
      config.dispatch_path != DispatchPath::kPull) {
    return Status::error(ErrorCode::kInvalidArgument, "BufferConfig dispatch_path = {}: unknown",
                         int(config.dispatch_path));
  }
  if (config.dispatch_path == DispatchPath::kPull && config.capacity_factor != 0.0) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        "BufferConfig dispatch_path = kPull with capacity_factor = {}: a capacity factor bounds "
        "the push dispatch's records window, and the pull dispatch has none (use kAuto or kPush)",
        config.capacity_factor);
  }
  return Status::ok();
}

Status check_mapping(const BufferConfig& config, const std::vector<std::int64_t>& unmapped,
                     int rank, bool* all_mapped) {
  const auto blind =
      std::find_if(unmapped.begin(), unmapped.end(), [](std::int64_t pe) { return pe >= 0; });
  *all_mapped = blind == unmapped.end();
  if (!*all_mapped &&
      (config.comm == CommKind::kWindow || config.dispatch_path == DispatchPath::kPull)) {
    const int r = int(blind - unmapped.begin()), pe = int(*blind);
    const bool window = config.comm == CommKind::kWindow;
    return Status::error(ErrorCode::kUnsupported,
                         "{}, and rank {} cannot map rank {}'s ({} transport): use {}",
                         window ? "the window comm context maps peers' windows"
                                : "dispatch_path = kPull reads peers' send windows in place",
                         r, pe, r == rank ? hp::shmem::transport_name(pe) : "another",
                         window ? "CommKind::kShmem" : "DispatchPath::kAuto or kPush");
  }
  return Status::ok();
}

}  // namespace

Status agree_on_config(const BufferConfig& config, bool* all_mapped) {
  const int ranks = hp::shmem::n_pes(), rank = hp::shmem::my_pe();
  std::vector<std::int64_t> table, unmapped;
  HP_RETURN_IF_ERROR(gather_configs(config, ranks, &table, &unmapped));
  HP_RETURN_IF_ERROR(check_agreement(table));
  HP_RETURN_IF_ERROR(check_ranges(config, ranks));
  return check_mapping(config, unmapped, rank, all_mapped);
}

}  // namespace hp::moe
