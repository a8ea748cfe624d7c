#!/bin/sh
# expect_failure.sh PATTERN COMMAND [ARGS...]: passes when COMMAND exits non-zero and its
# stderr has a line matching the extended regular expression PATTERN (for negative tests).
set -u
pattern="$1"
shift
err="$(mktemp)"
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
status=$?
cat "$err" >&2
if [ "$status" -eq 0 ]; then
    echo "expect_failure: '$*' exited 0; expected a failure" >&2
    exit 1
fi
if ! grep -Eq -- "$pattern" "$err"; then
    echo "expect_failure: '$*' exited $status, but its stderr has no line matching '$pattern'" >&2
    exit 1
fi
echo "expect_failure: '$*' exited $status and printed '$pattern', as expected"
