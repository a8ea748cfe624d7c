#!/usr/bin/env bash
# The runtime benchmark in one command: builds the core component (incrementally), then runs
# bench_runtime (the task runtime against oneTBB's flow graph on a chain, a fan-out/fan-in and a
# random DAG of ~100 000 empty tasks each).
#   bench/runtime/run.sh [--quick] [--tasks=N] [--rounds=R] [--width=W] [--scope=S] [--no-peer] [--only=chain|fan-out|random]
#                       [--orchestrator-cpu=N] [--explicit-deps]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/lib/common.sh"
"$root/scripts/prepare_host.sh" >/dev/null
"$root/scripts/build_core.sh" >/dev/null
exec "$HP_TESTS_DIR/core/bin/bench_runtime" "$@"
