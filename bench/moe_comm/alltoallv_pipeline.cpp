#include "moe_comm/alltoallv_pipeline.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/bfloat16.h"
#include "common/tensor_view.h"
#include "kernels/ops.h"
#include "kernels/targets.h"

namespace hp::bench {
namespace {

Status mpi_ok(int rc, const char* what) {
  HP_ENSURE(rc == MPI_SUCCESS, ErrorCode::kInternal, "{} failed (MPI error {})", what, rc);
  return Status::ok();
}

// Exclusive prefix sums of n counts.
void prefix(const std::vector<int>& n, std::vector<int>* off) {
  off->resize(n.size());
  std::exclusive_scan(n.begin(), n.end(), off->begin(), 0);
}

}  // namespace

AlltoallvPipeline::AlltoallvPipeline(MPI_Comm comm, std::int64_t hidden, std::int64_t experts, std::int64_t topk)
    : comm_(comm), hidden_(hidden), experts_(experts), topk_(topk) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &ranks_);
  local_ = experts / ranks_;
}

Status AlltoallvPipeline::dispatch(const std::uint16_t* x, const std::int64_t* idx, std::int64_t tokens) {
  if (table_ == nullptr) HP_RETURN_IF_ERROR(hp::kernels::selected_target(&table_));
  const auto H = std::size_t(hidden_), R = std::size_t(ranks_), L = std::size_t(local_);
  tokens_ = tokens;
  idx_ = idx;
  q_.resize(std::size_t(tokens) * H);
  q_scale_.resize(std::size_t(tokens));
  HP_RETURN_IF_ERROR(hp::kernels::quantize(*table_, TensorView(const_cast<std::uint16_t*>(x), DType::kBF16, {tokens, hidden_}),
                                           TensorView(q_.data(), DType::kInt8, {tokens, hidden_}),
                                           TensorView(q_scale_.data(), DType::kFP32, {tokens})));
  // Count exchange: pairs per expert, L per destination.
  send_pairs_.assign(std::size_t(experts_), 0);
  for (std::int64_t p = 0; p < tokens * topk_; ++p) {
    if (idx[p] >= 0) ++send_pairs_[std::size_t(idx[p])];
  }
  recv_pairs_.assign(R * L, 0);
  HP_RETURN_IF_ERROR(mpi_ok(MPI_Alltoall(send_pairs_.data(), int(L), MPI_INT, recv_pairs_.data(), int(L), MPI_INT, comm_),
                            "MPI_Alltoall"));
  // Permute: pairs in expert order (destination-major, since experts are), tokens in order.
  std::vector<int> expert_start;
  prefix(send_pairs_, &expert_start);
  send_rows_.assign(R, 0);
  for (std::size_t e = 0; e < std::size_t(experts_); ++e) send_rows_[e / L] += send_pairs_[e];
  prefix(send_rows_, &send_off_);
  const std::size_t pairs = std::size_t(send_off_.back() + send_rows_.back());
  send_x_.resize(pairs * H);
  send_scale_.resize(pairs);
  pair_slot_.assign(std::size_t(tokens * topk_), -1);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t k = 0; k < topk_; ++k) {
      const std::int64_t e = idx[t * topk_ + k];
      if (e < 0) continue;
      const auto slot = std::size_t(expert_start[std::size_t(e)]++);
      pair_slot_[std::size_t(t * topk_ + k)] = std::int64_t(slot);
      std::memcpy(send_x_.data() + slot * H, q_.data() + std::size_t(t) * H, H);
      send_scale_[slot] = q_scale_[std::size_t(t)];
    }
  }
  recv_rows_.assign(R, 0);
  for (std::size_t s = 0; s < R; ++s) {
    for (std::size_t l = 0; l < L; ++l) recv_rows_[s] += recv_pairs_[s * L + l];
  }
  prefix(recv_rows_, &recv_off_);
  const std::size_t rows = std::size_t(recv_off_.back() + recv_rows_.back());
  recv_x_.resize(rows * H);
  recv_scale_.resize(rows);
  auto scaled = [&](const std::vector<int>& v, int by, std::vector<int>* out) {
    out->resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) (*out)[i] = v[i] * by;
  };
  scaled(send_rows_, int(H), &counts_);
  scaled(send_off_, int(H), &displs_);
  scaled(recv_rows_, int(H), &rcounts_);
  scaled(recv_off_, int(H), &rdispls_);
  HP_RETURN_IF_ERROR(mpi_ok(MPI_Alltoallv(send_x_.data(), counts_.data(), displs_.data(), MPI_BYTE, recv_x_.data(),
                                          rcounts_.data(), rdispls_.data(), MPI_BYTE, comm_),
                            "MPI_Alltoallv (rows)"));
  HP_RETURN_IF_ERROR(mpi_ok(MPI_Alltoallv(send_scale_.data(), send_rows_.data(), send_off_.data(), MPI_FLOAT,
                                          recv_scale_.data(), recv_rows_.data(), recv_off_.data(), MPI_FLOAT, comm_),
                            "MPI_Alltoallv (scales)"));
  // Sort chunks: received source-major (then local expert), wanted expert-major (then source).
  grouped_x_.resize(rows * H);
  grouped_scale_.resize(rows);
  std::size_t at = 0;
  for (std::size_t l = 0; l < L; ++l) {
    for (std::size_t s = 0; s < R; ++s) {
      std::size_t from = std::size_t(recv_off_[s]);
      for (std::size_t j = 0; j < l; ++j) from += std::size_t(recv_pairs_[s * L + j]);
      const auto n = std::size_t(recv_pairs_[s * L + l]);
      std::memcpy(grouped_x_.data() + at * H, recv_x_.data() + from * H, n * H);
      std::memcpy(grouped_scale_.data() + at, recv_scale_.data() + from, n * sizeof(float));
      at += n;
    }
  }
  return Status::ok();
}

std::vector<std::int64_t> AlltoallvPipeline::expert_offsets() const {
  const auto R = std::size_t(ranks_), L = std::size_t(local_);
  std::vector<std::int64_t> off(L + 1, 0);
  for (std::size_t l = 0; l < L; ++l) {
    off[l + 1] = off[l];
    for (std::size_t s = 0; s < R && !recv_pairs_.empty(); ++s) off[l + 1] += recv_pairs_[s * L + l];
  }
  return off;
}

Status AlltoallvPipeline::combine(const std::uint16_t* expert_out, const float* weights, std::uint16_t* y) {
  const auto H = std::size_t(hidden_), R = std::size_t(ranks_), L = std::size_t(local_);
  // Chunks back to source-major order.
  back_send_.resize(recv_x_.size());
  std::size_t at = 0;
  for (std::size_t l = 0; l < L; ++l) {
    for (std::size_t s = 0; s < R; ++s) {
      std::size_t to = std::size_t(recv_off_[s]);
      for (std::size_t j = 0; j < l; ++j) to += std::size_t(recv_pairs_[s * L + j]);
      const auto n = std::size_t(recv_pairs_[s * L + l]);
      std::memcpy(back_send_.data() + to * H, expert_out + at * H, n * H * 2);
      at += n;
    }
  }
  back_recv_.resize(send_x_.size());
  HP_RETURN_IF_ERROR(mpi_ok(MPI_Alltoallv(back_send_.data(), rcounts_.data(), rdispls_.data(), MPI_UINT16_T,
                                          back_recv_.data(), counts_.data(), displs_.data(), MPI_UINT16_T, comm_),
                            "MPI_Alltoallv (combine)"));
  // Unpermute and reduce.
  std::vector<float> acc(H);
  for (std::int64_t t = 0; t < tokens_; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::int64_t k = 0; k < topk_; ++k) {
      const std::int64_t slot = pair_slot_[std::size_t(t * topk_ + k)];
      if (slot < 0) continue;
      const float w = weights[t * topk_ + k];
      const std::uint16_t* row = back_recv_.data() + std::size_t(slot) * H;
      for (std::size_t c = 0; c < H; ++c) acc[c] += w * bf16_to_float(row[c]);
    }
    for (std::size_t c = 0; c < H; ++c) y[std::size_t(t) * H + c] = float_to_bf16(acc[c]);
  }
  return Status::ok();
}

}  // namespace hp::bench
