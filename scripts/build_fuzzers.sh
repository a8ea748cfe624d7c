#!/usr/bin/env bash
# Builds the fuzz targets of tests/fuzz (docs/testing.md) into $HP_BUILD_DIR/fuzz: the core,
# symmetric_memory, multicore (the x86_64_v3 kernels, which every host of this project runs)
# and custom_ops components with clang 16, AddressSanitizer + UndefinedBehaviorSanitizer and
# libFuzzer's coverage: their libraries, tools, CPython extensions (no torch adapters) and fuzz
# targets, and the tests of core and symmetric_memory; no benchmarks. Everything links clang's
# shared sanitizer runtime, which a Python interpreter preloads to run the Python tests on this
# payload (scripts/run_tests.sh's AddressSanitizer passes use this build).
#
#   scripts/build_fuzzers.sh [--jobs N]
#
# Exit codes: 0 built, 1 HP-FUZZ-BUILD-FAILED (the component's log is named), 2 bad usage.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$HP_REPO_ROOT/scripts/lib/sanitizers.sh"

jobs="$(hp_nproc)"
while (($#)); do
    case "$1" in
        --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
        --jobs=*) jobs="${1#*=}"; shift ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) hp_die 2 HP-FUZZ-USAGE "unknown argument '$1'" "$0 --help" ;;
    esac
done
# clang 16 and its runtimes: deps/fuzz-packages.lock (installed as root, else the command).
"$HP_REPO_ROOT/scripts/prepare_host.sh" --lock "$HP_REPO_ROOT/deps/fuzz-packages.lock" >/dev/null

export "${hp_clang_build_env[@]}" HP_SANITIZE=address,undefined HP_FUZZ=1 HP_SANITIZE_PYTHON=1
export HP_BUILD_DIR="$HP_FUZZ_DIR" HP_CACHE_DIR="$HP_FUZZ_DIR/native/cache"
hp_info "building the fuzz targets (clang 16, ASan + UBSan + libFuzzer) into $HP_FUZZ_DIR"
for component in core symmetric_memory multicore custom_ops; do
    args=(--jobs "$jobs") tests=1
    if [[ "$component" == multicore || "$component" == custom_ops ]]; then
        args+=(--soc-list x86_64_v3) tests=0
    fi
    HP_BUILD_TESTS="$tests" "$HP_REPO_ROOT/scripts/build_$component.sh" "${args[@]}" ||
        hp_die 1 HP-FUZZ-BUILD-FAILED "$component did not build for fuzzing" \
            "see $HP_FUZZ_DIR/native/$component/log/build.log"
done
