#!/usr/bin/env bash
# The kernels benchmark in one command: builds what is needed (incrementally: core, multicore
# with the kernel targets and the benchmark against oneDNN), then runs it.
#   bench/kernels/run.sh [--quick] [--m=M] [--experts=E]     (HP_KERNEL_TARGET picks the target)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/lib/common.sh"
"$root/scripts/prepare_host.sh" >/dev/null
"$root/scripts/build_core.sh" >/dev/null
"$root/scripts/build_multicore.sh" >/dev/null
exec "$HP_TESTS_DIR/multicore/bin/bench_kernels" "$@"
