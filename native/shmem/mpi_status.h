// The Status of an MPI call, for the MPI transport's plugin (transport_mpi.cpp and
// mpi_put_signal.cpp).
#pragma once

#include <mpi.h>

#include <string_view>

#include "common/status.h"

namespace hp::shmem {

// SYSTEM_ERROR naming the call, its PE and MPI's message; ok for MPI_SUCCESS.
inline Status mpi_status(int rc, std::string_view call, int pe) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Status::error(ErrorCode::kSystemError, "{} (PE {}) failed: {}", call, pe,
                       std::string_view(text, std::size_t(length)));
}

// The status of a communication call of PE `self` to `pe`. Its arguments are checked before it
// is made, so when MPI fails one to another PE for a reason of its own (MPI_ERR_OTHER,
// MPI_ERR_INTERN, MPI_ERR_UNKNOWN), the connection to that PE broke: MPI without fault
// tolerance (Open MPI 4) reports a PE that died, or a host that dropped its connections, no
// other way. That is PEER_DEAD naming the PE; anything else is mpi_status's.
inline Status mpi_peer_status(int rc, std::string_view call, int pe, int self) {
  Status status = mpi_status(rc, call, pe);
  if (status.is_ok() || pe == self) return status;
  int error_class = MPI_ERR_UNKNOWN;
  MPI_Error_class(rc, &error_class);
  if (error_class != MPI_ERR_OTHER && error_class != MPI_ERR_INTERN &&
      error_class != MPI_ERR_UNKNOWN) {
    return status;
  }
  return Status::error(ErrorCode::kPeerDead,
                       "PE {} lost PE {}: {}; it died or its host cannot be reached (the "
                       "launcher's report says which); end the job",
                       self, pe, status.message());
}

}  // namespace hp::shmem
