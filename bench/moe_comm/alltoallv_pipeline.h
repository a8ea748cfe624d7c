// The peer of the MoE communication benchmark: dispatch and combine the way a careful user
// builds them on MPI. Dispatch quantises x to int8 per token, exchanges one row count per
// rank (MPI_Alltoall), packs each token once per destination rank (one permute pass; the row
// carries its scale and, per k, the local expert at that rank and the weight), sends the rows
// with one MPI_Alltoallv and copies them into per-expert groups (one unpermute pass: the
// layout a grouped GEMM consumes). Combine is the reverse: each received row's local expert
// outputs are summed with their weights (fp32, k order) into one bf16 row, one MPI_Alltoallv
// sends those home, and each source sums its token's rows from every rank in fp32 (rank order).
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
  // threads: the permute, unpermute and sum passes' OpenMP threads.
  AlltoallvPipeline(MPI_Comm comm, std::int64_t hidden, std::int64_t experts, std::int64_t topk,
                    int threads = 1);
  ~AlltoallvPipeline();
  AlltoallvPipeline(const AlltoallvPipeline&) = delete;
  AlltoallvPipeline& operator=(const AlltoallvPipeline&) = delete;

  // x bf16 [T, H], idx int64 [T, K] (-1 = none), weights fp32 [T, K]. Afterwards rows() rows
  // of int8 x, grouped by local expert (expert_offsets()), with their scales.
  Status dispatch(const std::uint16_t* x, const std::int64_t* idx, const float* weights,
                  std::int64_t tokens);
  // expert_out bf16 [rows(), H] in the dispatch's row order; y bf16 [T, H] (zeros for a token
  // with no expert).
  Status combine(const std::uint16_t* expert_out, std::uint16_t* y);

  std::int64_t rows() const { return std::int64_t(grouped_scale_.size()); }
  const std::int8_t* recv_x() const { return grouped_x_.data(); }
  const float* recv_scale() const { return grouped_scale_.data(); }
  // Where each local expert's rows start in recv_x() [local experts + 1].
  const std::vector<std::int64_t>& expert_offsets() const { return expert_off_; }
  std::int64_t local_experts() const { return local_; }

 private:
  // A dispatch row: H int8, then the fp32 scale, K fp32 weights and K uint8 local experts
  // (kNone: k's expert is on another rank), padded to 16 bytes.
  static constexpr std::uint8_t kNone = 0xff;  // also bounds the ranks and the local experts
  static constexpr std::int64_t kMaxTopk = 64;
  Status ensure_types();
  std::uint8_t* meta(std::uint8_t* row) const { return row + hidden_; }
  const std::uint8_t* meta(const std::uint8_t* row) const { return row + hidden_; }

  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 0, threads_;
  std::int64_t hidden_, experts_, topk_, local_, stride_;
  MPI_Datatype row_type_ = MPI_DATATYPE_NULL, back_type_ = MPI_DATATYPE_NULL;  // stride_ / 2H bytes
  const hp::kernels::KernelTable* table_ = nullptr;
  std::int64_t tokens_ = 0;
  std::vector<std::int8_t> q_;
  std::vector<float> q_scale_;
  // [T + 1]: token t's send rows are token_slot_[token_off_[t], token_off_[t+1])
  std::vector<int> token_off_;
  std::vector<int> token_slot_;            // send rows, per token in rank order
  std::vector<std::uint8_t> token_ranks_;  // [T x K]: token t's i-th destination rank at [t][i]
  std::vector<int> send_rows_, send_off_, recv_rows_, recv_off_;  // per rank, in rows
  std::vector<std::uint8_t> send_, recv_;                         // rows of stride_ bytes
  std::vector<std::int64_t> expert_off_;
  std::vector<std::int8_t> grouped_x_;
  std::vector<float> grouped_scale_;
  // [received rows + 1]: row i's pairs are [pair_off_[i], pair_off_[i+1])
  std::vector<int> pair_off_;
  // the pair's row in the grouped order, per received row in k order
  std::vector<int> pair_pos_;
  std::vector<float> pair_weight_;
  std::vector<std::uint16_t> back_send_, back_recv_;
};

}  // namespace hp::bench

#endif  // HYPER_PARALLEL_BENCH_MOE_COMM_ALLTOALLV_PIPELINE_H_
