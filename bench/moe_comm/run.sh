#!/usr/bin/env bash
# The MoE communication benchmark in one command: builds what is needed (incrementally: core,
# symmetric_memory, multicore with bench_moe_comm), then runs it under mpirun with 4 ranks on
# the shm transport (both comm contexts, zero-copy, low-latency, the MPI_Alltoallv pipeline,
# memcpy) and on the mpi transport (the shmem context over MPI-3 RMA: copying, zero-copy and
# low-latency, against the same pipeline).
#   bench/moe_comm/run.sh [--ranks 4] [bench_moe_comm options: --tokens --hidden --rounds --quick ...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/lib/common.sh"
ranks=4
if [[ "${1:-}" == "--ranks" ]]; then
    ranks="$2"
    shift 2
fi
"$root/scripts/prepare_host.sh" >/dev/null
"$root/scripts/build_core.sh" >/dev/null
"$root/scripts/build_symmetric_memory.sh" >/dev/null
"$root/scripts/build_multicore.sh" >/dev/null
# Open MPI as root, with the components that work here (docs/shmem.md, "Open MPI"); 4 ranks may exceed
# the CPUs. The heap holds the buffers of the largest shape: three on shm (both contexts and
# zero-copy), two on mpi. Each rank's heap is resident, so a job needs ranks x the heap size
# of memory: no more than that (24 GiB machines).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl='^openib,ofi' \
    OMPI_MCA_osc='^rdma' OMPI_MCA_rmaps_base_oversubscribe=1
bench="$HP_TESTS_DIR/multicore/bin/bench_moe_comm"
HP_SHMEM_HEAP_SIZE="${HP_SHMEM_HEAP_SIZE:-2000M}" mpirun -np "$ranks" "$bench" "$@"
echo
HP_SHMEM_HEAP_SIZE="${HP_SHMEM_HEAP_SIZE:-1400M}" HP_SHMEM_TRANSPORT=mpi \
    mpirun -np "$ranks" -x HP_SHMEM_TRANSPORT "$bench" --impls shmem,zero-copy,low-latency,alltoallv "$@"
