# The SoC target table (native/common/soc_targets.tsv) read from bash (sourced by common.sh,
# never executed). Plain bash: ./build.sh parses its options before any package is installed.

HP_SOC_TABLE="$HP_REPO_ROOT/native/common/soc_targets.tsv"

# hp_soc_rows: the table's rows, tab-separated, without comments.
hp_soc_rows() { grep -v '^#' "$HP_SOC_TABLE"; }

# hp_soc_names [all|cpu|default]: target names, narrowest first, comma-separated
# (all: every row; cpu: those with kernels; default: those built without --soc-list).
hp_soc_names() {
    local which="${1:-all}" name kind default rest out=()
    while IFS=$'\t' read -r name kind default rest; do
        case "$which" in
            cpu) [[ "$kind" == cpu ]] || continue ;;
            default) [[ "$default" == yes ]] || continue ;;
        esac
        out+=("$name")
    done < <(hp_soc_rows)
    (IFS=,; echo "${out[*]}")
}

# hp_soc_kind <name>: cpu, reserved, or nothing for a name the table lacks.
hp_soc_kind() {
    local name kind rest
    while IFS=$'\t' read -r name kind rest; do
        [[ "$name" == "$1" ]] && { echo "$kind"; return 0; }
    done < <(hp_soc_rows)
    return 0
}

# hp_soc_summary: "x86_64_v3 (AVX2/FMA), ..." for --help.
hp_soc_summary() {
    local name kind default requires flags summary out=""
    while IFS=$'\t' read -r name kind default requires flags summary; do
        out+="${out:+, }$name ($summary)"
    done < <(hp_soc_rows)
    echo "$out"
}
