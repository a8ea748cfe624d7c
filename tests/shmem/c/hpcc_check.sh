#!/bin/sh
# hpcc_check.sh HPCC HPRUN SOURCE: compiles SOURCE with the payload's hpcc (C99, pedantic,
# warnings as errors), checks that the program needs no LD_LIBRARY_PATH, and runs it on 2 PEs.
set -eu
hpcc="$1" hprun="$2" source="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$hpcc" --showme -std=c99 "$source" -o "$work/prog"
"$hpcc" -std=c99 -Wall -Wextra -pedantic -Werror -c "$source" -o "$work/prog.o"
"$hpcc" "$work/prog.o" -o "$work/prog"
env -u LD_LIBRARY_PATH "$hprun" -n 2 "$work/prog"
