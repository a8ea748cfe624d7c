#include "shmem/mpi_atomic.h"

#include <cstdint>

namespace hp::shmem {

int mpi_atomic(MPI_Win win, int pe, MPI_Aint disp, AtomicOp op, std::size_t width,
               const void* operand, const void* compare, void* result) {
  const MPI_Datatype type = width == 4 ? MPI_UINT32_T : MPI_UINT64_T;
  std::uint64_t unused = 0;  // MPI_NO_OP's operand, never read
  switch (op) {
    case AtomicOp::kFetch:
      return MPI_Fetch_and_op(&unused, result, type, pe, disp, MPI_NO_OP, win);
    case AtomicOp::kSet:
      return MPI_Accumulate(operand, 1, type, pe, disp, 1, type, MPI_REPLACE, win);
    case AtomicOp::kAdd:
      return MPI_Accumulate(operand, 1, type, pe, disp, 1, type, MPI_SUM, win);
    case AtomicOp::kSwap:
      return MPI_Fetch_and_op(operand, result, type, pe, disp, MPI_REPLACE, win);
    case AtomicOp::kCompareSwap:
      return MPI_Compare_and_swap(operand, compare, result, type, pe, disp, win);
    case AtomicOp::kFetchAdd:
      return MPI_Fetch_and_op(operand, result, type, pe, disp, MPI_SUM, win);
  }
  return MPI_ERR_OP;
}

}  // namespace hp::shmem
