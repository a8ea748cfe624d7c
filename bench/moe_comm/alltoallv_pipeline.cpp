#include "moe_comm/alltoallv_pipeline.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/tensor_view.h"
#include "kernels/ops.h"
#include "kernels/targets.h"

namespace hp::bench {
namespace {

Status mpi_ok(int rc, const char* what) {
  HP_ENSURE(rc == MPI_SUCCESS, ErrorCode::kInternal, "{} failed (MPI error {})", what, rc);
  return Status::ok();
}

// Exclusive prefix sums of n counts; returns the total.
int prefix(const std::vector<int>& n, std::vector<int>* off) {
  off->resize(n.size());
  std::exclusive_scan(n.begin(), n.end(), off->begin(), 0);
  return n.empty() ? 0 : off->back() + n.back();
}

}  // namespace

AlltoallvPipeline::AlltoallvPipeline(MPI_Comm comm, std::int64_t hidden, std::int64_t experts,
                                     std::int64_t topk, int threads)
    : comm_(comm), threads_(std::max(threads, 1)), hidden_(hidden), experts_(experts), topk_(topk) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &ranks_);
  local_ = experts / ranks_;
  stride_ = (hidden + std::int64_t(sizeof(float)) * (1 + topk) + topk + 15) / 16 * 16;
}

AlltoallvPipeline::~AlltoallvPipeline() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  if (row_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&row_type_);
  if (back_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&back_type_);
}

Status AlltoallvPipeline::ensure_types() {
  if (row_type_ != MPI_DATATYPE_NULL) return Status::ok();
  HP_ENSURE(local_ > 0 && local_ < kNone && ranks_ <= kNone && experts_ % ranks_ == 0,
            ErrorCode::kInvalidArgument,
            "alltoallv: {} experts over {} ranks: want a multiple of the ranks, under {} per rank "
            "and ranks",
            experts_, ranks_, int(kNone));
  HP_ENSURE(topk_ > 0 && topk_ <= kMaxTopk, ErrorCode::kInvalidArgument,
            "alltoallv: topk {} outside [1, {}]", topk_, kMaxTopk);
  HP_RETURN_IF_ERROR(hp::kernels::selected_target(&table_));
  HP_RETURN_IF_ERROR(
      mpi_ok(MPI_Type_contiguous(int(stride_), MPI_BYTE, &row_type_), "MPI_Type_contiguous"));
  HP_RETURN_IF_ERROR(mpi_ok(MPI_Type_commit(&row_type_), "MPI_Type_commit"));
  HP_RETURN_IF_ERROR(
      mpi_ok(MPI_Type_contiguous(int(2 * hidden_), MPI_BYTE, &back_type_), "MPI_Type_contiguous"));
  return mpi_ok(MPI_Type_commit(&back_type_), "MPI_Type_commit");
}

Status AlltoallvPipeline::dispatch(const std::uint16_t* x, const std::int64_t* idx,
                                   const float* weights, std::int64_t tokens) {
  HP_RETURN_IF_ERROR(ensure_types());
  const auto H = std::size_t(hidden_), K = std::size_t(topk_), R = std::size_t(ranks_),
             L = std::size_t(local_), S = std::size_t(stride_);
  tokens_ = tokens;
  const auto T = std::size_t(tokens);
  q_.resize(T * H);
  q_scale_.resize(T);
  HP_RETURN_IF_ERROR(hp::kernels::quantize(
      *table_, TensorView(const_cast<std::uint16_t*>(x), DType::kBF16, {tokens, hidden_}),
      TensorView(q_.data(), DType::kInt8, {tokens, hidden_}),
      TensorView(q_scale_.data(), DType::kFP32, {tokens})));
  // Plan: each token's destination ranks, in rank order; rows per rank.
  token_off_.assign(T + 1, 0);
  token_ranks_.resize(T * K);
  send_rows_.assign(R, 0);
  for (std::size_t t = 0; t < T; ++t) {
    std::uint8_t* ranks = token_ranks_.data() + t * K;
    int n = 0;
    for (std::size_t k = 0; k < K; ++k) {
      const std::int64_t e = idx[t * K + k];
      if (e < 0) continue;
      HP_ENSURE(e < experts_, ErrorCode::kInvalidArgument, "alltoallv: token {} expert {} of {}", t,
                e, experts_);
      const auto r = std::uint8_t(std::size_t(e) / L);
      if (std::find(ranks, ranks + n, r) != ranks + n) continue;
      ranks[n++] = r;
      ++send_rows_[r];
    }
    std::sort(ranks, ranks + n);
    token_off_[t + 1] = token_off_[t] + n;
  }
  const int sent = prefix(send_rows_, &send_off_);
  token_slot_.resize(std::size_t(sent));
  std::vector<int> cursor = send_off_;
  for (std::size_t t = 0; t < T; ++t) {
    for (int j = token_off_[t]; j < token_off_[t + 1]; ++j) {
      token_slot_[std::size_t(j)] = cursor[token_ranks_[t * K + std::size_t(j - token_off_[t])]]++;
    }
  }
  // Permute: one row per (token, destination rank).
  send_.resize(std::size_t(sent) * S);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::size_t t = 0; t < T; ++t) {
    for (int j = token_off_[t]; j < token_off_[t + 1]; ++j) {
      const std::size_t r = token_ranks_[t * K + std::size_t(j - token_off_[t])];
      std::uint8_t* row = send_.data() + std::size_t(token_slot_[std::size_t(j)]) * S;
      std::memcpy(row, q_.data() + t * H, H);
      float* scale_weights = reinterpret_cast<float*>(meta(row));  // scale, then K weights
      std::uint8_t* local = meta(row) + sizeof(float) * (1 + K);
      scale_weights[0] = q_scale_[t];
      for (std::size_t k = 0; k < K; ++k) {
        const std::int64_t e = idx[t * K + k];
        const bool here = e >= 0 && std::size_t(e) / L == r;
        scale_weights[1 + k] = here ? weights[t * K + k] : 0.0f;
        local[k] = here ? std::uint8_t(std::size_t(e) % L) : kNone;
      }
    }
  }
  recv_rows_.assign(R, 0);
  HP_RETURN_IF_ERROR(
      mpi_ok(MPI_Alltoall(send_rows_.data(), 1, MPI_INT, recv_rows_.data(), 1, MPI_INT, comm_),
             "MPI_Alltoall (counts)"));
  const int received = prefix(recv_rows_, &recv_off_);
  recv_.resize(std::size_t(received) * S);
  HP_RETURN_IF_ERROR(
      mpi_ok(MPI_Alltoallv(send_.data(), send_rows_.data(), send_off_.data(), row_type_,
                           recv_.data(), recv_rows_.data(), recv_off_.data(), row_type_, comm_),
             "MPI_Alltoallv (rows)"));
  // Unpermute: received rows (source-major, then token order) into per-expert groups, each in
  // the same order; every pair of a row remembers where its copy went.
  std::vector<std::int64_t> per_expert(L, 0);
  pair_off_.assign(std::size_t(received) + 1, 0);
  for (std::size_t i = 0; i < std::size_t(received); ++i) {
    const std::uint8_t* local = meta(recv_.data() + i * S) + sizeof(float) * (1 + K);
    int n = 0;
    for (std::size_t k = 0; k < K; ++k) {
      if (local[k] == kNone) continue;
      ++per_expert[local[k]];
      ++n;
    }
    pair_off_[i + 1] = pair_off_[i] + n;
  }
  expert_off_.assign(L + 1, 0);
  std::inclusive_scan(per_expert.begin(), per_expert.end(), expert_off_.begin() + 1);
  const auto pairs = std::size_t(pair_off_.back());
  pair_pos_.resize(pairs);
  pair_weight_.resize(pairs);
  std::vector<std::int64_t> at(expert_off_.begin(), expert_off_.end() - 1);
  for (std::size_t i = 0, p = 0; i < std::size_t(received); ++i) {
    const auto* scale_weights = reinterpret_cast<const float*>(meta(recv_.data() + i * S));
    const std::uint8_t* local = meta(recv_.data() + i * S) + sizeof(float) * (1 + K);
    for (std::size_t k = 0; k < K; ++k) {
      if (local[k] == kNone) continue;
      pair_pos_[p] = int(at[local[k]]++);
      pair_weight_[p++] = scale_weights[1 + k];
    }
  }
  grouped_x_.resize(pairs * H);
  grouped_scale_.resize(pairs);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::size_t i = 0; i < std::size_t(received); ++i) {
    const std::uint8_t* row = recv_.data() + i * S;
    const float scale = reinterpret_cast<const float*>(meta(row))[0];
    for (int p = pair_off_[i]; p < pair_off_[i + 1]; ++p) {
      const auto pos = std::size_t(pair_pos_[std::size_t(p)]);
      std::memcpy(grouped_x_.data() + pos * H, row, H);
      grouped_scale_[pos] = scale;
    }
  }
  return Status::ok();
}

Status AlltoallvPipeline::combine(const std::uint16_t* expert_out, std::uint16_t* y) {
  HP_ENSURE(table_ != nullptr, ErrorCode::kFailedPrecondition,
            "alltoallv: combine before a dispatch");
  const auto H = std::size_t(hidden_), received = pair_off_.size() - 1;
  // Each received row's pairs summed with their weights into the row going home.
  back_send_.resize(received * H);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::size_t i = 0; i < received; ++i) {
    const void* rows[kMaxTopk];  // a row's pairs: at most K
    const int first = pair_off_[i], n = pair_off_[i + 1] - first;
    for (int p = 0; p < n; ++p)
      rows[p] = expert_out + std::size_t(pair_pos_[std::size_t(first + p)]) * H;
    const hp::kernels::RowSumArgs args{rows,
                                       hp::kernels::ElementType::kBF16,
                                       pair_weight_.data() + first,
                                       n,
                                       std::int64_t(H),
                                       hp::kernels::ElementType::kBF16,
                                       back_send_.data() + i * H,
                                       nullptr,
                                       0};
    table_->row_sum(&args);
  }
  back_recv_.resize(token_slot_.size() * H);
  HP_RETURN_IF_ERROR(mpi_ok(
      MPI_Alltoallv(back_send_.data(), recv_rows_.data(), recv_off_.data(), back_type_,
                    back_recv_.data(), send_rows_.data(), send_off_.data(), back_type_, comm_),
      "MPI_Alltoallv (combine)"));
  // Each token's rows from its ranks, summed in rank order.
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::size_t t = 0; t < std::size_t(tokens_); ++t) {
    const void* rows[kMaxTopk];  // a token's ranks: at most K
    const int first = token_off_[t], n = token_off_[t + 1] - first;
    std::uint16_t* out = y + t * H;
    if (n == 0) {
      std::memset(out, 0, H * sizeof(std::uint16_t));
      continue;
    }
    for (int j = 0; j < n; ++j)
      rows[j] = back_recv_.data() + std::size_t(token_slot_[std::size_t(first + j)]) * H;
    const hp::kernels::RowSumArgs args{rows,
                                       hp::kernels::ElementType::kBF16,
                                       nullptr,
                                       n,
                                       std::int64_t(H),
                                       hp::kernels::ElementType::kBF16,
                                       out,
                                       nullptr,
                                       0};
    table_->row_sum(&args);
  }
  return Status::ok();
}

}  // namespace hp::bench
