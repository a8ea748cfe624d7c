#!/usr/bin/env bash
# Runs fuzz targets of the fuzz build (scripts/build_fuzzers.sh) from their seed corpus
# (tests/fuzz/<name>/corpus, regression inputs included) for a bounded time. Fails on any crash,
# hang (an input running past 10 s), leak, out-of-memory or sanitizer report; the input is kept
# in $HP_BUILD_DIR/fuzz/artifacts/<name>/ (once fixed, add it to the seed corpus under a name
# that says what it found). New inputs go to $HP_BUILD_DIR/fuzz/corpus/<name>/, never into the
# checkout.
#
#   scripts/fuzz.sh NAME SECONDS     one target: settings, tensor_dump, replay, job_segment,
#                                    op_abi, ops_json
#   scripts/fuzz.sh --all SECONDS    every target, SECONDS each, one per CPU at a time
#
# Prints each target's executions and corpus size. Exit codes: 0 nothing found, 1
# HP-FUZZ-FOUND (which target, where its input is), 2 bad usage, 3 HP-FUZZ-NOT-BUILT.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$HP_REPO_ROOT/scripts/lib/sanitizers.sh"

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
[[ $# -eq 2 && "$2" =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
names=()
if [[ "$1" == --all ]]; then
    for d in "$HP_REPO_ROOT"/tests/fuzz/*/; do
        [[ -d "$d/corpus" ]] && names+=("$(basename "$d")")
    done
else
    [[ -d "$HP_REPO_ROOT/tests/fuzz/$1/corpus" ]] ||
        hp_die 2 HP-FUZZ-USAGE "no fuzz target '$1' (tests/fuzz/$1/corpus)" "$0 --help"
    names=("$1")
fi

# fuzz_one NAME SECONDS: runs one target; its verdict goes to $HP_FUZZ_DIR/log/NAME.verdict.
fuzz_one() {
    local name="$1" seconds="$2" bin work artifacts log rc=0 execs corpus
    bin="$(find "$HP_FUZZ_DIR/native/tests" -path "*/fuzz/fuzz_$name" -type f 2>/dev/null | head -n1)"
    log="$HP_FUZZ_DIR/log/$name.log"
    mkdir -p "$(dirname "$log")"
    if [[ ! -x "$bin" ]]; then
        echo "not-built" >"$HP_FUZZ_DIR/log/$name.verdict"
        return
    fi
    work="$HP_FUZZ_DIR/corpus/$name" artifacts="$HP_FUZZ_DIR/artifacts/$name"
    mkdir -p "$work" "$artifacts" "$HP_FUZZ_DIR/tmp"
    # A target's scratch files (fuzz_check.h) stay in the build directory. libFuzzer's link puts
    # libstdc++ before the shared ASan runtime, which must come first (its operator new and
    # delete, its interceptors): it is preloaded.
    env "${hp_sanitizer_env[@]}" TMPDIR="$HP_FUZZ_DIR/tmp" ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" \
        LD_PRELOAD="$(hp_asan_runtime)" \
        "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$work" "$HP_REPO_ROOT/tests/fuzz/$name/corpus" \
        >"$log" 2>&1 || rc=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
    corpus="$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' "$log" | tail -n1)"
    if ((rc != 0)); then
        echo "found $rc" >"$HP_FUZZ_DIR/log/$name.verdict"
    else
        echo "ok ${execs:-?} ${corpus:-?}" >"$HP_FUZZ_DIR/log/$name.verdict"
    fi
}

# Up to one target per CPU at a time (a target is one process).
hp_info "fuzzing ${names[*]}: $2 s each, $(hp_nproc) at a time"
running=0
for name in "${names[@]}"; do
    rm -f "$HP_FUZZ_DIR/log/$name.verdict"
    fuzz_one "$name" "$2" &
    running=$((running + 1))
    if ((running >= $(hp_nproc))); then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

found=()
for name in "${names[@]}"; do
    read -r verdict a b <"$HP_FUZZ_DIR/log/$name.verdict"
    case "$verdict" in
        ok) hp_info "fuzz_$name: $a executions, corpus $b inputs" ;;
        not-built) hp_die 3 HP-FUZZ-NOT-BUILT "fuzz_$name is not built" "scripts/build_fuzzers.sh" ;;
        *)
            tail -n 40 "$HP_FUZZ_DIR/log/$name.log" >&2
            hp_warn "fuzz_$name found a failure (exit $a); its input: $HP_FUZZ_DIR/artifacts/$name/ (log: $HP_FUZZ_DIR/log/$name.log)"
            found+=("$name")
            ;;
    esac
done
((${#found[@]} == 0)) ||
    hp_die 1 HP-FUZZ-FOUND "fuzzing found failures in: ${found[*]}" "see the inputs under $HP_FUZZ_DIR/artifacts/"
