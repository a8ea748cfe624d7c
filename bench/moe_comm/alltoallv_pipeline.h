// The peer of the MoE communication benchmark: dispatch and combine the way frameworks build
// them on MPI (Megatron's all-to-all token dispatcher): quantise, exchange per-expert counts with
// MPI_Alltoall, permute the (token, expert) pairs into expert order, MPI_Alltoallv the int8 rows
// and their scales, then sort the received chunks from source-major to expert-major order (the
// layout a grouped GEMM consumes). Combine reverses it: chunks back to source-major,
// MPI_Alltoallv the bf16 rows home, and each source sums weight x row per token in fp32.
// Each pair travels on its own: a token with k experts on one rank is sent k times.
#ifndef HYPER_PARALLEL_BENCH_MOE_COMM_ALLTOALLV_PIPELINE_H_
#define HYPER_PARALLEL_BENCH_MOE_COMM_ALLTOALLV_PIPELINE_H_

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/kernel_table.h"

namespace hp::bench {

class AlltoallvPipeline {
 public:
  AlltoallvPipeline(MPI_Comm comm, std::int64_t hidden, std::int64_t experts, std::int64_t topk);

  // x bf16 [T, H], idx int64 [T, K] (-1 = none). Afterwards rows() rows of int8 x, grouped by
  // local expert (offsets()), with their scales.
  Status dispatch(const std::uint16_t* x, const std::int64_t* idx, std::int64_t tokens);
  // expert_out bf16 [rows(), H] in the dispatch's row order; weights fp32 [T, K]; y bf16 [T, H].
  Status combine(const std::uint16_t* expert_out, const float* weights, std::uint16_t* y);

  std::int64_t rows() const { return std::int64_t(recv_scale_.size()); }
  const std::int8_t* recv_x() const { return grouped_x_.data(); }
  const float* recv_scale() const { return grouped_scale_.data(); }
  // Where each local expert's rows start in recv_x() [local experts + 1].
  std::vector<std::int64_t> expert_offsets() const;
  std::int64_t local_experts() const { return local_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 0;
  std::int64_t hidden_, experts_, topk_, local_;
  const hp::kernels::KernelTable* table_ = nullptr;
  std::int64_t tokens_ = 0;
  const std::int64_t* idx_ = nullptr;
  std::vector<std::int8_t> q_;
  std::vector<float> q_scale_;
  std::vector<std::int64_t> pair_slot_;    // [T x K]: the send row of each pair, -1 none
  std::vector<int> send_pairs_, recv_pairs_;  // per expert [E] / per (source, local expert) [R x L]
  std::vector<int> send_rows_, send_off_, recv_rows_, recv_off_;  // per rank, in rows
  std::vector<int> counts_, displs_, rcounts_, rdispls_;          // MPI arguments (scaled)
  std::vector<std::int8_t> send_x_, recv_x_, grouped_x_;
  std::vector<float> send_scale_, recv_scale_, grouped_scale_;
  std::vector<std::uint16_t> back_send_, back_recv_;
};

}  // namespace hp::bench

#endif  // HYPER_PARALLEL_BENCH_MOE_COMM_ALLTOALLV_PIPELINE_H_
