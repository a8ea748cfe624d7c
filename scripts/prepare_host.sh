#!/usr/bin/env bash
# Prepare the host: every Debian package in deps/host-packages.lock present (installed when
# running as root, else the exact command is printed and we fail), then the Python
# interpreter chosen and checked. Called by build.sh and scripts/run_tests.sh.
#
#   scripts/prepare_host.sh [--lock FILE] [--check]
#     --lock FILE  another lock file (tests use this)
#     --check      never install; report what is missing and fail
#
# Exit codes: 0 ready, 2 bad usage, 3 HP-PREPARE-PACKAGES-MISSING, 4 HP-PREPARE-INSTALL-FAILED,
# 5 HP-PREPARE-PYTHON-* (see scripts/lib/python.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$HP_REPO_ROOT/scripts/lib/python.sh"

lock="$HP_REPO_ROOT/deps/host-packages.lock"
check_only=0
while (($#)); do
    case "$1" in
        --lock) lock="${2:?--lock needs a file}"; shift 2 ;;
        --lock=*) lock="${1#--lock=}"; shift ;;
        --check) check_only=1; export hp_prepare_check_only=1; shift ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) hp_die 2 HP-PREPARE-USAGE "unknown argument '$1'" "$0 --help" ;;
    esac
done
[[ -r "$lock" ]] || hp_die 2 HP-PREPARE-USAGE "lock file '$lock' is not readable"

declare -a names=() versions=()
while read -r name version _; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    names+=("$name"); versions+=("$version")
done <"$lock"

# Prints "<installed version>" or nothing when the package is not installed.
installed_version() {
    { dpkg-query -W -f='${db:Status-Abbrev}|${Version}' "$1" 2>/dev/null || true; } |
        awk -F'|' '$1 ~ /^ii/ {print $2}'
}

declare -a missing=()
for i in "${!names[@]}"; do
    [[ -n "$(installed_version "${names[$i]}")" ]] || missing+=("${names[$i]}")
done

if ((${#missing[@]})); then
    install_cmd="apt-get install -y --no-install-recommends ${missing[*]}"
    if ((check_only)) || ! hp_is_root; then
        hp_die 3 HP-PREPARE-PACKAGES-MISSING \
            "missing Debian packages: ${missing[*]}" "sudo apt-get update && sudo $install_cmd"
    fi
    hp_info "installing ${#missing[@]} locked Debian packages: ${missing[*]}"
    # 'apt-get update' only when some missing package has no install candidate yet.
    for p in "${missing[@]}"; do
        if [[ "$(apt-cache policy "$p" 2>/dev/null)" != *"Candidate: "[^\(]* ]]; then
            hp_info "apt-get update (no candidate for $p)"
            apt-get update -qq || hp_die 4 HP-PREPARE-INSTALL-FAILED "apt-get update failed"
            break
        fi
    done
    DEBIAN_FRONTEND=noninteractive $install_cmd -qq >"$HP_BUILD_DIR/prepare-apt.log" 2>&1 ||
        hp_die 4 HP-PREPARE-INSTALL-FAILED "apt-get install failed (log: $HP_BUILD_DIR/prepare-apt.log)" \
            "$install_cmd"
fi

for i in "${!names[@]}"; do
    have="$(installed_version "${names[$i]}")"
    [[ -n "$have" ]] || hp_die 4 HP-PREPARE-INSTALL-FAILED "${names[$i]} is still not installed"
    if [[ "$have" != "${versions[$i]}" ]]; then
        hp_warn "${names[$i]}: installed $have, lock verified with ${versions[$i]}"
    fi
done
hp_info "host packages: ${#names[@]} locked, all present ($(basename "$lock"))"

hp_select_python
hp_info "python: $HP_PYTHON ($HP_PYTHON_VERSION)"
