// One OpenSHMEM atomic as the MPI-3 atomic that does it, for the MPI transport's plugin
// (transport_mpi.cpp, and mpi_messages.cpp, which applies the atomics that arrive by message).
#pragma once

#include <mpi.h>

#include <cstddef>

#include "shmem/transport.h"

namespace hp::shmem {

// Issues `op` on the `width`-byte (4 or 8) word at displacement `disp` of `pe`'s part of `win`
// (operand, compare: width bytes each, where `op` takes them; result: width bytes, for the
// fetching ops). Returns MPI's code; like any RMA, the operation is complete only after a
// flush (of `pe`, or a local one for the origin's buffers).
int mpi_atomic(MPI_Win win, int pe, MPI_Aint disp, AtomicOp op, std::size_t width,
               const void* operand, const void* compare, void* result);

}  // namespace hp::shmem
