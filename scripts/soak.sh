#!/usr/bin/env bash
# Soak: the fused MoE layer's forward and backward for many iterations on 4 ranks (hp-moe under
# hprun), in the clang build of scripts/build_fuzzers.sh: AddressSanitizer with LeakSanitizer
# and UndefinedBehaviorSanitizer, so a leak, a use after free or undefined behaviour in any
# iteration, in any rank, fails it. The result is checked against the references at the end.
#
#   scripts/soak.sh [ITERATIONS]     default 10000; scripts/run_tests.sh runs a short one
#
# Exit codes: 0 clean, 1 HP-SOAK-FAILED (the log is named), 2 bad usage, 3 HP-SOAK-NOT-BUILT.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$HP_REPO_ROOT/scripts/lib/sanitizers.sh"

iterations="${1:-10000}"
[[ "$iterations" =~ ^[1-9][0-9]*$ && $# -le 1 ]] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
moe="$HP_FUZZ_DIR/native/payload/hyper_parallel/multicore/bin/hp-moe"
[[ -x "$moe" ]] || hp_die 3 HP-SOAK-NOT-BUILT "$moe is not built" "scripts/build_fuzzers.sh"
log="$HP_FUZZ_DIR/log/soak.log"
mkdir -p "$(dirname "$log")"
hp_info "soak: hp-moe --backward, 4 ranks, $iterations iterations under ASan + LSan + UBSan"
start=$SECONDS
if ! env "${hp_sanitizer_env[@]}" ASAN_OPTIONS="detect_leaks=1" \
    "$moe" --ranks 4 --tokens 16 --hidden 64 --intermediate 32 --experts 8 --topk 2 \
    --iterations "$iterations" --warmup 0 --backward >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    hp_die 1 HP-SOAK-FAILED "the soak failed after $((SECONDS - start)) s" "see $log"
fi
hp_info "soak: $iterations iterations clean in $((SECONDS - start)) s (log: $log)"
