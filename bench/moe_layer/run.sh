#!/usr/bin/env bash
# The MoE layer benchmark in one command: prepares the host (the build's packages and
# deps/bench-packages.lock), builds what is needed (incrementally: core, symmetric_memory,
# multicore with bench_moe_layer), installs KTransformers' kernels into their own venv
# (build/bench/kt-venv, from deps/bench-python.lock; without network their rows say so), then
# runs the driver. Arguments go to run.py (see its --help); e.g.
#   bench/moe_layer/run.sh --shapes qwen3 --tokens 16,256,2048 --configs 1x1,2x1 --json out.jsonl
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/lib/common.sh"
"$root/scripts/prepare_host.sh" >/dev/null
"$root/scripts/prepare_host.sh" --lock "$root/deps/bench-packages.lock" >/dev/null
"$root/scripts/build_core.sh" >/dev/null
"$root/scripts/build_symmetric_memory.sh" >/dev/null
"$root/scripts/build_multicore.sh" >/dev/null
lock="$root/deps/bench-python.lock"
venv="$HP_BUILD_DIR/bench/kt-venv"
kt_args=()
if ! cmp -s "$lock" "$venv/installed.lock"; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    if "$venv/bin/pip" install --quiet --no-deps --require-hashes --only-binary=:all: -r "$lock" >&2; then
        cp "$lock" "$venv/installed.lock"
    else
        hp_warn "kt-kernel could not be installed from PyPI: the KTransformers rows will say unavailable"
    fi
fi
if [[ -f "$venv/installed.lock" ]]; then
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    kt_args=(--kt-path "$site" --kt-python "$venv/bin/python")
fi
exec /usr/bin/python3 "$HP_TESTS_DIR/multicore/bench/moe_layer/run.py" "${kt_args[@]}" "$@"
