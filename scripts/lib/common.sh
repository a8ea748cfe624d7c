# Shared by every build and test script (sourced, never executed).
# Sets HP_REPO_ROOT, HP_BUILD_DIR (HP_BUILD_DIR overrides <repo>/build), HP_NATIVE_DIR,
# HP_CACHE_DIR and HP_BUILD_PAYLOAD (this build dir's payload), and the message helpers.

# A failing command inside $(...) fails the assignment (and, under errexit, the script).
shopt -s inherit_errexit
HP_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HP_BUILD_DIR="${HP_BUILD_DIR:-$HP_REPO_ROOT/build}"
mkdir -p "$HP_BUILD_DIR"
HP_BUILD_DIR="$(cd "$HP_BUILD_DIR" && pwd)"
HP_NATIVE_DIR="$HP_BUILD_DIR/native"
# Heavy component caches live outside the build dir's per-run state so that a second build
# dir (a test's scratch build, a sanitizer build) reuses what matches.
HP_CACHE_DIR="${HP_CACHE_DIR:-$HP_NATIVE_DIR/cache}"
# (HP_PAYLOAD_DIR is the loader's override: never set it here.)
HP_BUILD_PAYLOAD="$HP_NATIVE_DIR/payload/hyper_parallel"
HP_TESTS_DIR="$HP_NATIVE_DIR/tests"
source "$HP_REPO_ROOT/scripts/lib/soc_targets.sh"

hp_info() { printf '[hp] %s\n' "$*"; }
hp_warn() { printf '[hp] WARNING: %s\n' "$*" >&2; }

# hp_die <exit code> <reason code> <message> [recovery command]
hp_die() {
    local rc="$1" reason="$2" msg="$3" recovery="${4:-}"
    printf '[hp] ERROR %s: %s\n' "$reason" "$msg" >&2
    [[ -n "$recovery" ]] && printf '[hp]   recover: %s\n' "$recovery" >&2
    exit "$rc"
}

hp_is_root() { [[ "$(id -u)" == 0 ]]; }

hp_nproc() { nproc 2>/dev/null || echo 1; }

# hp_one_of <word> <allowed...>: exact membership.
hp_one_of() {
    local word="$1" w
    shift
    for w in "$@"; do [[ "$w" == "$word" ]] && return 0; done
    return 1
}
