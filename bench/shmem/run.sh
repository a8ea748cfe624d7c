#!/usr/bin/env bash
# The symmetric-memory benchmark in one command: builds what is needed (incrementally: core,
# symmetric_memory with its benchmark programs against HyperParallel, Open MPI's OSHMEM and
# MPI-3 RMA), then runs them interleaved and prints the table with ratios.
#   bench/shmem/run.sh [--pes 2,4] [--rounds 5] [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/lib/common.sh"
source "$root/scripts/lib/python.sh"
"$root/scripts/prepare_host.sh" >/dev/null
hp_select_python
"$root/scripts/build_core.sh" >/dev/null
"$root/scripts/build_symmetric_memory.sh" >/dev/null
exec "$HP_PYTHON" "$HP_TESTS_DIR/symmetric_memory/bin/run_bench.py" "$@"
