#!/usr/bin/env bash
# HyperParallel's one full build: check the host, prepare locked dependencies, build each
# selected component, assemble one payload, package one wheel. See docs/build.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib/common.sh"

# The --soc-list row of --help, from the SoC target table.
soc_help() {
    local first=1 line
    while IFS= read -r line; do
        if ((first)); then
            printf '%-15s%-32s%s\n' --soc-list "$(hp_soc_names default)" "$line"
            first=0
        else
            printf '%47s%s\n' "" "$line"
        fi
    done < <(fold -s -w 50 <<<"comma list of $(hp_soc_summary)" | sed 's/ *$//')
}

usage() {
    cat <<'EOF'
usage: ./build.sh [options]

Checks the host, installs missing locked Debian packages (as root; otherwise prints the
command), builds the selected native components, assembles build/native/payload/hyper_parallel
(shared by the wheel and by PYTHONPATH development) and packages one wheel for the current
CPython ABI and host arch into build/dist. setup.py only packages: it never compiles.

option         default                         values
--multicore    all                             off, mindspore|ms, torch|pytorch, all|both
                                               framework adapters of the fused MoE layer; also
                                               selects the same frameworks' symmetric memory
--shmem        all                             off, mindspore|ms, torch|pytorch, all|both
                                               symmetric memory library and framework wrappers;
                                               the final set is the union of this and what
                                               --multicore needs
--custom-ops   on                              on, off (no framework names)
EOF
    soc_help
    cat <<'EOF'
--strict       off                             off: a failed optional component is left out of
                                               the payload and the wheel is still built
                                               on: any selected component failing stops the
                                               build, no wheel
--jobs         nproc                           positive integer: parallel compile jobs
--clean        (off)                           remove the selected components' work/install
                                               before building; downloaded and cached
                                               dependencies are kept
-h, --help                                     print this and build nothing

Both '--opt value' and '--opt=value' work. Invalid values exit 2.
The core native library (common, platform) is always built; it is not optional.

examples:
  # everything: both frameworks' symmetric memory and multicore, custom ops, three x86 targets
  ./build.sh
  # MindSpore native components
  ./build.sh --multicore mindspore --shmem mindspore --custom-ops on
  # Torch native components, without custom ops
  ./build.sh --multicore torch --shmem torch --custom-ops off
  # only the core wheel, no optional native components
  ./build.sh --multicore off --shmem off --custom-ops off
  # only the AMX target, and require every selected component to succeed
  ./build.sh --soc-list x86_64_amx --strict on
  # clean the selected components' caches and set the parallelism
  ./build.sh --clean --jobs 32

environment: HP_BUILD_DIR (default ./build), HP_CACHE_DIR,
HP_SANITIZE=address|undefined|address,undefined|thread, HP_WERROR=1, HP_BUILD_TESTS=0, PYTHON
(the interpreter; default: the first of /usr/bin/python3, python3 that has the required
modules). `hp config` lists every HP_* variable.
EOF
}

bad_value() {  # <option> <value> <allowed>
    printf "[hp] ERROR HP-BUILD-USAGE: invalid value '%s' for %s; allowed: %s\n" "$2" "$1" "$3" >&2
    echo "[hp]   see ./build.sh --help" >&2
    exit 2
}

# off|mindspore|ms|torch|pytorch|all|both -> space-separated canonical framework names
frameworks_of() {
    case "$2" in
        off) echo "" ;;
        mindspore|ms) echo "mindspore" ;;
        torch|pytorch) echo "torch" ;;
        all|both) echo "torch mindspore" ;;
        *) bad_value "$1" "$2" "off, mindspore|ms, torch|pytorch, all|both" ;;
    esac
}

host_arch="$(uname -m)"
multicore="all" shmem="all" custom_ops="on" strict="off" jobs="$(hp_nproc)" clean=0
soc_list="$(hp_soc_names default)"
while (($#)); do
    opt="$1"
    case "$opt" in
        -h|--help) usage; exit 0 ;;
        --clean) clean=1; shift; continue ;;
        --clean=*) bad_value --clean "${opt#*=}" "(no value: it is a switch)" ;;
        --multicore=*|--shmem=*|--custom-ops=*|--soc-list=*|--strict=*|--jobs=*)
            name="${opt%%=*}" value="${opt#*=}"; shift ;;
        --multicore|--shmem|--custom-ops|--soc-list|--strict|--jobs)
            [[ $# -ge 2 && "$2" != --* ]] || bad_value "$opt" "" "see below (the option needs a value)"
            name="$opt" value="$2"; shift 2 ;;
        *) echo "[hp] ERROR HP-BUILD-USAGE: unknown option '$opt'; see ./build.sh --help" >&2; exit 2 ;;
    esac
    case "$name" in
        --multicore) frameworks_of "$name" "$value" >/dev/null; multicore="$value" ;;
        --shmem) frameworks_of "$name" "$value" >/dev/null; shmem="$value" ;;
        --custom-ops) [[ "$value" =~ ^(on|off)$ ]] || bad_value "$name" "$value" "on, off"; custom_ops="$value" ;;
        --strict) [[ "$value" =~ ^(on|off)$ ]] || bad_value "$name" "$value" "on, off"; strict="$value" ;;
        --jobs) [[ "$value" =~ ^[1-9][0-9]*$ ]] || bad_value "$name" "$value" "a positive integer"; jobs="$value" ;;
        --soc-list) soc_list="$value" ;;
    esac
done

# SoC targets: known, for this host's architecture, no duplicates, not empty.
declare -a socs=()
IFS=, read -ra requested_socs <<<"$soc_list"
all_socs="$(hp_soc_names all | sed 's/,/, /g')"
((${#requested_socs[@]})) || bad_value --soc-list "$soc_list" "a comma list of $all_socs"
for soc in "${requested_socs[@]}"; do
    case "$(hp_soc_kind "$soc")" in
        cpu)
            [[ "$host_arch" == x86_64 ]] || hp_die 2 HP-BUILD-USAGE \
                "--soc-list: $soc is a target for x86_64, not this $host_arch host (no mixed-arch wheels)" ;;
        reserved) ;;
        *) bad_value --soc-list "$soc" "$all_socs (comma-separated)" ;;
    esac
    [[ " ${socs[*]} " == *" $soc "* ]] || socs+=("$soc")
done
[[ "$host_arch" == x86_64 ]] || hp_die 1 HP-BUILD-HOST-UNSUPPORTED \
    "HyperParallel builds on x86_64 hosts only (this is $host_arch)"

multicore_fws=($(frameworks_of --multicore "$multicore"))
shmem_fws=($(frameworks_of --shmem "$shmem"))
# The union rule: multicore needs the symmetric memory of the same frameworks.
declare -a shmem_final=()
for fw in torch mindspore; do
    if [[ " ${shmem_fws[*]} ${multicore_fws[*]} " == *" $fw "* ]]; then shmem_final+=("$fw"); fi
done
join() { local IFS=,; [[ $# -gt 0 ]] && echo "$*" || echo off; }
soc_csv="$(IFS=,; echo "${socs[*]}")"
union_note=""
[[ "$(join "${shmem_final[@]}")" != "$(join "${shmem_fws[@]}")" ]] &&
    union_note=" (--shmem $shmem + what --multicore $multicore needs)"
hp_info "selection: multicore=$(join "${multicore_fws[@]}") shmem=$(join "${shmem_final[@]}")$union_note" \
    "custom-ops=$custom_ops soc-list=$soc_csv strict=$strict jobs=$jobs clean=$clean"

"$HP_REPO_ROOT/scripts/prepare_host.sh"
source "$HP_REPO_ROOT/scripts/lib/python.sh"
hp_select_python

common_args=(--jobs "$jobs" --soc-list "$soc_csv" --no-payload)
((clean)) && common_args+=(--clean)
fw_arg() { [[ $# -gt 0 ]] && (IFS=,; echo "$*") || echo none; }

# Each entry: <component> <script> <frameworks>
declare -a components=("core")
"$HP_REPO_ROOT/scripts/build_core.sh" "${common_args[@]}" || hp_die 1 HP-BUILD-CORE-FAILED \
    "the core native library failed to build (it is not optional); log: $HP_NATIVE_DIR/core/log/build.log" \
    "scripts/build_core.sh --jobs $jobs"
if ((${#shmem_final[@]})); then
    components+=(symmetric_memory)
    "$HP_REPO_ROOT/scripts/build_symmetric_memory.sh" "${common_args[@]}" --frameworks "$(fw_arg "${shmem_final[@]}")" || true
fi
if ((${#multicore_fws[@]})); then
    components+=(multicore)
    "$HP_REPO_ROOT/scripts/build_multicore.sh" "${common_args[@]}" --frameworks "$(fw_arg "${multicore_fws[@]}")" || true
fi
if [[ "$custom_ops" == on ]]; then
    components+=(custom_ops)
    # Ops that require SHMEM are built against this run's symmetric memory only.
    sdk_args=()
    [[ " ${components[*]} " == *" symmetric_memory "* ]] || sdk_args=(--shmem-sdk none)
    "$HP_REPO_ROOT/scripts/build_custom_ops.sh" "${common_args[@]}" "${sdk_args[@]}" || true
fi

# Assemble the payload from this run's successful components only (staged, ELF-checked,
# then swapped in), then package it.
status_files=()
for c in "${components[@]}"; do status_files+=("$HP_NATIVE_DIR/$c/status.tsv"); done
"$HP_PYTHON" "$HP_REPO_ROOT/scripts/assemble_payload.py" assemble \
    --native-dir "$HP_NATIVE_DIR" --strict "$strict" --soc-list "$soc_csv" --python "$HP_PYTHON" \
    --selection "multicore=$(join "${multicore_fws[@]}") shmem=$(join "${shmem_final[@]}") custom-ops=$custom_ops" \
    "${status_files[@]}" || exit 1

"$HP_REPO_ROOT/scripts/package_wheel.sh"
