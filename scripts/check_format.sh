#!/usr/bin/env bash
# Checks that every C and C++ file of the checkout is formatted as .clang-format says
# (clang-format 14, Debian's clang-format-14). Exit 1 lists the files that are not; fix them
# with: scripts/check_format.sh --fix
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
formatter=clang-format-14
command -v "$formatter" >/dev/null ||
    hp_die 1 HP-TESTS-FORMATTER-MISSING "$formatter is not installed" "scripts/prepare_host.sh"
mapfile -t files < <(git -C "$HP_REPO_ROOT" ls-files --cached --others --exclude-standard \
    '*.h' '*.c' '*.cpp')
cd "$HP_REPO_ROOT"
if [[ "${1:-}" == --fix ]]; then
    "$formatter" -i "${files[@]}"
    exit 0
fi
present=()
for f in "${files[@]}"; do
    [[ -f "$f" ]] && present+=("$f")  # not: deleted, not yet committed
done
# One formatter per CPU over batches of files; it reports each violation as
# "<file>:<line>:<column>: error: code should be clang-formatted", and fails on anything else.
status=0
report="$(printf '%s\0' "${present[@]}" |
    xargs -0 -n 64 -P "$(hp_nproc)" "$formatter" --dry-run --Werror 2>&1)" || status=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
    <<<"$report" | sort -u)
if ((status != 0 && ${#bad[@]} == 0)); then
    printf '%s\n' "$report" | tail -n 20 >&2
    hp_die 1 HP-TESTS-FORMATTER-FAILED "$formatter failed (exit $status)" "run it on the files above"
fi
if ((${#bad[@]})); then
    printf '  %s\n' "${bad[@]}" >&2
    hp_die 1 HP-TESTS-UNFORMATTED "${#bad[@]} C/C++ files are not formatted as .clang-format says" \
        "scripts/check_format.sh --fix"
fi
hp_info "format: ${#files[@]} C/C++ files formatted"
