#!/usr/bin/env bash
# Package the Python sources and the assembled payload into one wheel in build/dist.
# setup.py only packages: no compiling, no downloading. Called by build.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$HP_REPO_ROOT/scripts/lib/python.sh"
hp_select_python

dist="$HP_BUILD_DIR/dist"
work="$HP_BUILD_DIR/python"
log="$HP_BUILD_DIR/python/package.log"
rm -rf "$work"
mkdir -p "$dist" "$work"
rm -f "$dist"/hyper_parallel-*.whl
cd "$HP_REPO_ROOT"
HP_PAYLOAD_DIR="$HP_BUILD_PAYLOAD" "$HP_PYTHON" setup.py \
    egg_info --egg-base "$work" \
    build --build-base "$work/build" \
    bdist_wheel --bdist-dir "$work/bdist" --dist-dir "$dist" >"$log" 2>&1 ||
    hp_die 1 HP-BUILD-WHEEL-FAILED "setup.py bdist_wheel failed (log: $log)"
wheel="$(ls "$dist"/hyper_parallel-*.whl)"
if [[ -f "$HP_BUILD_PAYLOAD/manifest.json" ]]; then
    hp_info "payload: $HP_BUILD_PAYLOAD"
else
    hp_warn "no payload at $HP_BUILD_PAYLOAD: the wheel is core-only (Python alone); run ./build.sh"
fi
hp_info "wheel: $wheel"
