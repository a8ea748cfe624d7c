# Activation of HyperParallel's multicore payload, for the shell that will start the framework:
#
#   source <payload>/multicore/lib/set_env.bash [--verbose] [--chip-cpus LIST] [VENDOR_DIR ...]
#
# (an installed wheel: source "$(command -v hyper_parallel_multicore_set_env.bash)", its
# locator). Source it before Python imports torch: the native libraries read these variables
# once, when they load. It sets, and exports:
#   HP_VENDOR_PATH   the payload's op package, then each VENDOR_DIR given, then the entries
#                    already in the variable; each directory once, in that order
#   HP_CHIP_CPUS     the chip's CPUs, and OMP_NUM_THREADS / OPENBLAS_NUM_THREADS the number of
#                    the framework's: a partition of this shell's CPUs (below)
#   HP_ACTIVATED     the payload's identity (<version>:<digest of its manifest>)
# The partition: --chip-cpus LIST gives the chip its CPUs and the framework the others (all of
# them when none are left). Otherwise the cores this shell may run on (hwloc's topology, NUMA
# node by node, as `<payload>/core/bin/hp-topology --partition` prints it) are halved: the
# framework gets the first floor(C/2) cores, the chip the others, each core with its SMT
# siblings, the chip's list cores first; one core: its threads are halved; one CPU: both get
# it. A variable already set (by the user, or by an earlier activation) is kept, so sourcing twice
# changes nothing. It never writes a file and changes nothing outside this shell.
if ! (return 0 2>/dev/null); then
    echo "set_env.bash must be sourced, not executed: source \"${BASH_SOURCE[0]}\"" >&2
    exit 2
fi

# A cpulist ("0-3,8,10-11") as one CPU number per word; fails on anything else.
__hp_cpulist() {
    local part lo hi out=() parts
    [[ -n "$1" ]] || return 1
    IFS=, read -r -a parts <<<"$1"
    for part in "${parts[@]}"; do
        [[ "$part" =~ ^([0-9]+)(-([0-9]+))?$ ]] || return 1
        lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}
        ((lo <= hi)) || return 1
        for ((; lo <= hi; ++lo)); do out+=("$lo"); done
    done
    echo "${out[@]}"
}

__hp_activate() {
    local verbose=0 chip="" dirs=() payload cpus i framework=() chip_list=() d seen
    while (($#)); do
        case "$1" in
            --verbose) verbose=1 ;;
            --chip-cpus) chip="${2:-}"; shift ;;
            --chip-cpus=*) chip="${1#--chip-cpus=}" ;;
            -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
            -*) echo "set_env.bash: unknown option $1 (--verbose, --chip-cpus LIST, VENDOR_DIR ...)" >&2; return 2 ;;
            *) [[ -d "$1" ]] || { echo "set_env.bash: vendor directory $1 does not exist" >&2; return 2; }
               dirs+=("$(cd "$1" && pwd)") ;;
        esac
        shift
    done
    payload="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    [[ -f "$payload/manifest.json" ]] || { echo "set_env.bash: no payload manifest at $payload" >&2; return 2; }
    # HP_VENDOR_PATH: the payload's package, the given dirs, what was there; each once.
    local path=() joined=""
    [[ -f "$payload/custom_ops/ops.json" ]] && path+=("$payload/custom_ops")
    path+=("${dirs[@]}")
    IFS=: read -r -a seen <<<"${HP_VENDOR_PATH:-}"
    path+=("${seen[@]}")
    declare -A have=()
    for d in "${path[@]}"; do
        [[ -n "$d" && -z "${have[$d]:-}" ]] || continue
        have[$d]=1
        joined+="${joined:+:}$d"
    done
    export HP_VENDOR_PATH="$joined"
    # The CPU partition.
    if [[ -n "$chip" ]]; then
        cpus=($(__hp_cpulist "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$$/status)"))
        chip_list=($(__hp_cpulist "$chip")) ||
            { echo "set_env.bash: --chip-cpus '$chip' is not a CPU list (e.g. 2-7 or 0,2,4)" >&2; return 2; }
        local -A in_chip=()
        for i in "${chip_list[@]}"; do in_chip[$i]=1; done
        for i in "${cpus[@]}"; do [[ -n "${in_chip[$i]:-}" ]] || framework+=("$i"); done
        ((${#framework[@]})) || framework=("${cpus[@]}")
    else
        local plan key list
        plan="$("$payload/core/bin/hp-topology" --partition)" ||
            { echo "set_env.bash: cannot read the CPU topology (above); give the chip its CPUs with --chip-cpus LIST" >&2; return 2; }
        while read -r key list; do
            case "$key" in
                framework) framework=($(__hp_cpulist "$list")) ;;
                chip) chip_list=($(__hp_cpulist "$list")) ;;
            esac
        done <<<"$plan"
        ((${#framework[@]} && ${#chip_list[@]})) ||
            { echo "set_env.bash: hp-topology printed no partition: '$plan'" >&2; return 2; }
    fi
    [[ -n "${HP_CHIP_CPUS:-}" ]] || export HP_CHIP_CPUS="$(IFS=,; echo "${chip_list[*]}")"
    [[ -n "${OMP_NUM_THREADS:-}" ]] || export OMP_NUM_THREADS="${#framework[@]}"
    [[ -n "${OPENBLAS_NUM_THREADS:-}" ]] || export OPENBLAS_NUM_THREADS="$OMP_NUM_THREADS"
    export HP_ACTIVATED="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$payload/manifest.json" | head -n1):$(sha256sum <"$payload/manifest.json" | cut -c1-16)"
    if ((verbose)); then
        echo "HyperParallel activated from $payload"
        for d in HP_VENDOR_PATH HP_CHIP_CPUS OMP_NUM_THREADS OPENBLAS_NUM_THREADS HP_ACTIVATED; do
            echo "  $d=${!d}"
        done
    fi
}
if __hp_activate "$@"; then
    unset -f __hp_activate __hp_cpulist
    return 0
fi
unset -f __hp_activate __hp_cpulist
return 2
