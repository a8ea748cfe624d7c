# The machinery every component script shares (sourced, never executed).
#
# A component script builds one component into build/native/<component>/{work,install,log},
# records one status line per part (the component itself, its framework adapters, its SoC
# targets) in build/native/<component>/status.tsv, and, unless --no-payload, refreshes its
# own slice of the payload. Status lines are tab-separated:
#   <part> <ok|failed|skipped> <reason code or -> <log or -> <message> <recovery command or ->
# Exit status: 0 when the component's native part built, 1 when it failed (an optional
# failure: build.sh decides what that means), 2 for bad usage.

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$HP_REPO_ROOT/scripts/lib/python.sh"
source "$HP_REPO_ROOT/scripts/lib/cache.sh"

HP_ALL_FRAMEWORKS=(torch mindspore)
# The components whose installs this one compiles and links against, besides the core.
hp_linked_slices() {
    case "$HP_COMPONENT" in
        multicore) echo symmetric_memory ;;
        custom_ops) echo symmetric_memory multicore ;;
    esac
}
HP_ADAPTER_SLICES=($(hp_linked_slices))  # the slices a framework adapter links (hp_build_adapter)
IFS=, read -ra HP_ALL_SOCS <<<"$(hp_soc_names all)"  # the SoC target table

hp_component_usage() {
    cat <<EOF
usage: $(basename "$0") [--frameworks LIST|none] [--soc-list LIST] [--jobs N] [--clean] [--no-payload]
  Builds the $HP_COMPONENT component into $HP_NATIVE_DIR/$HP_COMPONENT/{work,install,log}
  and refreshes its slice of the payload ($HP_BUILD_PAYLOAD/$HP_COMPONENT).
  --frameworks  framework adapters to build: comma list of torch, mindspore; or none (default none)
  --soc-list    kernel targets (default: $(hp_soc_names default))
  --jobs N      parallel compile jobs (default: nproc)
  --clean       remove this component's work and install dirs first (caches stay)
  --no-payload  leave the payload alone (build.sh assembles it)
EOF
    if [[ -n "${hp_component_extra_usage-}" ]]; then
        printf '%s\n' "$hp_component_extra_usage"
    fi
}

# Parses the common component arguments into HP_FRAMEWORKS (array), HP_SOCS (array), HP_JOBS,
# HP_CLEAN, HP_NO_PAYLOAD.
hp_component_parse_args() {
    HP_FRAMEWORKS=() HP_JOBS="$(hp_nproc)"
    IFS=, read -ra HP_SOCS <<<"$(hp_soc_names default)"
    HP_CLEAN=0 HP_NO_PAYLOAD=0
    local value
    while (($#)); do
        case "$1" in
            --frameworks|--soc-list|--jobs) value="${2:-}"; [[ $# -ge 2 ]] || { hp_component_usage >&2; exit 2; }
                                            set -- "$1=$value" "${@:3}"; continue ;;
            --frameworks=*) value="${1#*=}"; HP_FRAMEWORKS=()
                [[ "$value" == none ]] || IFS=, read -ra HP_FRAMEWORKS <<<"$value" ;;
            --soc-list=*) IFS=, read -ra HP_SOCS <<<"${1#*=}" ;;
            --jobs=*) HP_JOBS="${1#*=}"
                [[ "$HP_JOBS" =~ ^[1-9][0-9]*$ ]] || hp_die 2 HP-BUILD-USAGE "--jobs '$HP_JOBS': expected a positive integer" ;;
            --clean) HP_CLEAN=1 ;;
            --no-payload) HP_NO_PAYLOAD=1 ;;
            -h|--help) hp_component_usage; exit 0 ;;
            *) hp_component_usage >&2; hp_die 2 HP-BUILD-USAGE "unknown argument '$1'" ;;
        esac
        shift
    done
    local f
    for f in "${HP_FRAMEWORKS[@]}"; do
        hp_one_of "$f" "${HP_ALL_FRAMEWORKS[@]}" ||
            hp_die 2 HP-BUILD-USAGE "--frameworks: '$f' is not one of: ${HP_ALL_FRAMEWORKS[*]} (or none)"
    done
    for f in "${HP_SOCS[@]}"; do
        hp_one_of "$f" "${HP_ALL_SOCS[@]}" ||
            hp_die 2 HP-BUILD-USAGE "--soc-list: '$f' is not one of: ${HP_ALL_SOCS[*]}"
    done
}

# Sets up the component's directories and status file; call after parsing.
hp_component_begin() {
    HP_COMPONENT_DIR="$HP_NATIVE_DIR/$HP_COMPONENT"
    HP_WORK_DIR="$HP_COMPONENT_DIR/work"
    HP_INSTALL_DIR="$HP_COMPONENT_DIR/install"
    HP_LOG_DIR="$HP_COMPONENT_DIR/log"
    HP_LOG="$HP_LOG_DIR/build.log"
    HP_STATUS_FILE="$HP_COMPONENT_DIR/status.tsv"
    if ((HP_CLEAN)); then
        hp_info "$HP_COMPONENT: --clean: removing work and install (caches are kept)"
        rm -rf "$HP_WORK_DIR" "$HP_INSTALL_DIR"
    fi
    mkdir -p "$HP_WORK_DIR" "$HP_LOG_DIR"
    : >"$HP_STATUS_FILE"
    : >"$HP_LOG"
    hp_select_python  # dies visibly (the empty status then reads as HP-BUILD-NO-STATUS)
    HP_CXX="$(command -v "${CXX:-g++}")" ||
        hp_die 1 HP-BUILD-NO-COMPILER "no C++ compiler '${CXX:-g++}' on PATH" "apt-get install -y build-essential"
}

# hp_status <part> <ok|failed|skipped> <reason|-> <message> [recovery]
hp_status() {
    local part="$1" state="$2" reason="$3" message="$4" recovery="${5:--}"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$part" "$state" "$reason" "$HP_LOG" "$message" "$recovery" \
        >>"$HP_STATUS_FILE"
    if [[ "$state" == failed ]]; then
        hp_warn "$part failed: $reason: $message"
        hp_warn "  log: $HP_LOG"
        [[ "$recovery" != - ]] && hp_warn "  recover: $recovery"
    fi
    return 0
}

# What an adapter build needs to know of each framework, from one import of it by the chosen
# interpreter (importing torch takes seconds): the interpreter and framework versions, which key
# the adapter's work dir, and the CMake prefix of the framework's package config (torch only).
declare -gA HP_FRAMEWORK_VERSIONS=() HP_FRAMEWORK_CMAKE_PREFIX=()

# Checks whether framework $1 can be imported by the chosen interpreter, recording its facts
# above; on failure records the adapter part as failed and returns 1.
hp_check_framework() {
    local fw="$1" part="$HP_COMPONENT.$1" out err
    if out="$("$HP_PYTHON" - "$fw" 2>&1 <<'PY'
import importlib, sys
fw = sys.argv[1]
module = importlib.import_module(fw)
print("hp-framework-versions:", sys.version.splitlines()[0], module.__version__)
print("hp-framework-cmake-prefix:", module.utils.cmake_prefix_path if fw == "torch" else "")
PY
)"; then
        HP_FRAMEWORK_VERSIONS[$fw]="$(sed -n 's/^hp-framework-versions: //p' <<<"$out")"
        HP_FRAMEWORK_CMAKE_PREFIX[$fw]="$(sed -n 's/^hp-framework-cmake-prefix: *//p' <<<"$out")"
        return 0
    fi
    err="$(tail -n1 <<<"$out")"
    local hint
    case "$fw" in
        torch) hint="apt-get install -y python3-torch libtorch-dev (PyTorch 1.13 for /usr/bin/python3), then ./build.sh --multicore torch --shmem torch --strict on" ;;
        mindspore) hint="install MindSpore >= 2.10 for $HP_PYTHON (it is not packaged for Debian 12), then ./build.sh --multicore mindspore --shmem mindspore --strict on; or leave it out: ./build.sh --multicore torch --shmem torch" ;;
    esac
    echo "$fw: $err" >>"$HP_LOG"
    hp_status "$part" failed HP-BUILD-FRAMEWORK-UNAVAILABLE "$fw is not importable by $HP_PYTHON ($err)" "$hint"
    return 1
}

# hp_framework_adapters <adapter sources dir> <recovery>: checks each selected framework, then
# records its adapter as missing when the adapter sources (<dir>/<framework>) do not exist yet.
# Sets HP_BUILDABLE_ADAPTERS to the frameworks whose adapters can be built.
hp_framework_adapters() {
    local dir="$1" recovery="$2" fw
    HP_BUILDABLE_ADAPTERS=()
    for fw in "${HP_FRAMEWORKS[@]}"; do
        hp_check_framework "$fw" || continue
        if [[ ! -d "$HP_REPO_ROOT/$dir/$fw" ]]; then
            hp_status "$HP_COMPONENT.$fw" failed HP-BUILD-SOURCES-MISSING \
                "the $fw adapter of $HP_COMPONENT ($dir/$fw) is not in this checkout yet" "$recovery"
            continue
        fi
        HP_BUILDABLE_ADAPTERS+=("$fw")
    done
}

# hp_component_state: this component's status (ok, failed, ...) as recorded so far.
hp_component_state() {
    awk -F'\t' -v p="$HP_COMPONENT" '$1 == p {print $2}' "$HP_STATUS_FILE"
}

# hp_build_adapters <adapters dir> <recovery>: each selected framework's adapter
# (hp_framework_adapters), built when the component's library built, else recorded as failed
# for want of it.
hp_build_adapters() {
    local dir="$1" recovery="$2" fw
    hp_framework_adapters "$dir" "$recovery"
    for fw in "${HP_BUILDABLE_ADAPTERS[@]}"; do
        if [[ "$(hp_component_state)" == ok ]]; then
            hp_build_adapter "$fw" "$dir"
        else
            hp_status "$HP_COMPONENT.$fw" failed HP-BUILD-DEPENDENCY-MISSING \
                "the $fw adapter needs the $HP_COMPONENT library, which did not build" "$0"
        fi
    done
}

# hp_build_adapter <framework> <adapters dir>: builds <adapters dir>/<framework> (its own CMake
# project) clean, into this component's install tree, against the component's install as a
# C++ user sees it (find_package(HyperParallel COMPONENTS ...) through a merged-payload view of
# the core, this component and the components of HP_ADAPTER_SLICES).
# Framework adapters are never cached: the work dir is keyed by the Python / framework /
# toolchain identity and rebuilt from scratch every time.
hp_build_adapter() {
    local fw="$1" src="$HP_REPO_ROOT/$2/$1" part="$HP_COMPONENT.$1" identity work view prefix
    identity="$({ hp_toolchain_identity; echo "${HP_FRAMEWORK_VERSIONS[$fw]}"; } | sha256sum | cut -c1-16)"
    rm -rf "$HP_COMPONENT_DIR/adapters"
    work="$HP_COMPONENT_DIR/adapters/$fw-$identity"
    view="$HP_COMPONENT_DIR/adapters/view/hyper_parallel"
    mkdir -p "$view"
    # Hard-linked copies, not symlinks: CMake resolves a symlinked package dir to its target,
    # which would hide the other slices the package config looks for beside the core.
    cp -al "$HP_NATIVE_DIR/core/install/hyper_parallel/core" "$view/core"
    cp -al "$HP_INSTALL_DIR/hyper_parallel/$HP_COMPONENT" "$view/$HP_COMPONENT"
    local slice  # the slices of the components this one links (HP_ADAPTER_SLICES)
    for slice in "${HP_ADAPTER_SLICES[@]}"; do
        cp -al "$HP_NATIVE_DIR/$slice/install/hyper_parallel/$slice" "$view/$slice"
    done
    prefix="$view/core"
    [[ -n "${HP_FRAMEWORK_CMAKE_PREFIX[$fw]}" ]] && prefix+=";${HP_FRAMEWORK_CMAKE_PREFIX[$fw]}"
    if {
        echo "== adapter $fw ($(date -Is)), identity $identity"
        cmake -S "$src" -B "$work" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DCMAKE_CXX_COMPILER="$HP_CXX" -DCMAKE_PREFIX_PATH="$prefix" -DHP_WERROR="${HP_WERROR:-0}" \
            -DHP_PYTHON="$HP_PYTHON" &&
            cmake --build "$work" --parallel "$HP_JOBS" &&
            cmake --install "$work" --prefix "$HP_INSTALL_DIR" &&
            hp_split_debug "$HP_INSTALL_DIR/hyper_parallel"
    } >>"$HP_LOG" 2>&1; then
        hp_status "$part" ok - "built for $fw (identity $identity)"
        hp_info "$part: built"
    else
        hp_status "$part" failed HP-BUILD-ADAPTER-FAILED "the $fw adapter did not build (see the log)" \
            "scripts/build_$HP_COMPONENT.sh --frameworks $fw"
        tail -n 20 "$HP_LOG" >&2
    fi
}

# hp_split_debug <tree>: the shipped ELF files under <tree> lose their debug info to
# $HP_NATIVE_DIR/debug/.build-id (scripts/split_debug.py), before anything records their
# digests or caches them. Sanitizer builds, never shipped, keep theirs (their reports need it).
hp_split_debug() {
    [[ -n "${HP_SANITIZE:-}" ]] && return 0
    "$HP_PYTHON" "$HP_REPO_ROOT/scripts/split_debug.py" "$1" "$HP_NATIVE_DIR/debug"
}

# hp_cmake_build_cached <key> : configure/build/install $HP_COMPONENT, or restore it from the
# cache (scripts/lib/cache.sh) when a verified install with the same key exists. Output goes to
# the log. A component script may define hp_check_install, run on a fresh install before it is
# cached. Returns non-zero on any failure (every step checks its own status: callers run this
# under `||`, where errexit is off).
hp_cmake_build_cached() {
    local key="$1"
    HP_CACHE_HIT=0
    if hp_cache_restore "$key" "$HP_INSTALL_DIR" >>"$HP_LOG" 2>&1; then
        HP_CACHE_HIT=1
        return 0
    fi
    hp_reset_work_dir_if_toolchain_changed
    {
        echo "== configure ($(date -Is))"
        cmake -S "$HP_REPO_ROOT" -B "$HP_WORK_DIR" -G Ninja "${HP_CMAKE_ARGS[@]}" || return 10
        echo "== build"
        cmake --build "$HP_WORK_DIR" --parallel "$HP_JOBS" || return 11
        echo "== install"
        rm -rf "$HP_INSTALL_DIR" || return 12
        cmake --install "$HP_WORK_DIR" --prefix "$HP_INSTALL_DIR" || return 12
        hp_split_debug "$HP_INSTALL_DIR/hyper_parallel" || return 12
        echo "== check the installed headers"
        hp_check_installed_headers || return 13
        if declare -F hp_check_install >/dev/null; then
            echo "== check the install"
            hp_check_install || return 13
        fi
        hp_cache_store "$key" "$HP_INSTALL_DIR" || return 14
    } >>"$HP_LOG" 2>&1 || return $?
}

# Every header this component installs compiles with only the installs for company: one C++
# translation unit includes them all, seeing this slice's include dirs and those of the core and
# the linked slices (hp_linked_slices), as a user's build does; the C API headers at the include
# root are also compiled as C. A public header that includes one nobody installs fails here, in
# the component that installs it, instead of in a dependent's build or a user's. (Regular builds
# only: a sanitizer build installs the same headers.)
hp_check_installed_headers() {
    [[ -n "${HP_SANITIZE:-}" ]] && return 0
    local own="$HP_INSTALL_DIR/hyper_parallel/$HP_COMPONENT/include" slice dir
    [[ -d "$own" ]] || return 0
    local flags=(-I "$own" -I "$own/hyper_parallel")
    for slice in $([[ "$HP_COMPONENT" == core ]] || echo core) $(hp_linked_slices); do
        dir="$HP_NATIVE_DIR/$slice/install/hyper_parallel/$slice/include"
        flags+=(-isystem "$dir" -isystem "$dir/hyper_parallel")
    done
    local cxx_tu="$HP_WORK_DIR/installed_headers.cpp" c_tu="$HP_WORK_DIR/installed_headers.c"
    # An #include line for every header under `own` (find's extra arguments: which ones).
    includes() { (cd "$own" && find . "$@" -name '*.h' | LC_ALL=C sort | sed -E 's|^\./(.*)$|#include "\1"|'); }
    includes >"$cxx_tu"
    includes -maxdepth 1 >"$c_tu"
    "$HP_CXX" -std=c++20 -fsyntax-only "${flags[@]}" "$cxx_tu" || return 1
    [[ -s "$c_tu" ]] || return 0
    "${CC:-gcc}" -std=c11 -fsyntax-only -I "$own" "$c_tu"
}

# hp_status_from_error <stderr of a check script>: that failure as this component's status: its
# "[hp] ERROR <reason>: <message>" and "[hp]   recover: <command>" lines.
hp_status_from_error() {
    local err="$1" line reason message recovery
    line="$(grep -m1 '^\[hp\] ERROR ' <<<"$err" || true)"
    reason="$(sed -E 's/^\[hp\] ERROR ([A-Z0-9-]+): .*/\1/' <<<"$line")"
    message="$(sed -E 's/^\[hp\] ERROR [A-Z0-9-]+: //' <<<"$line")"
    recovery="$(grep -m1 '^\[hp\]   recover: ' <<<"$err" | sed -E 's/^\[hp\]   recover: //' || true)"
    [[ -n "$line" ]] || { reason=HP-BUILD-COMPILE-FAILED message="a check of the install failed: $(tail -n1 <<<"$err")"; }
    printf '%s\n' "$err" >>"$HP_LOG"
    hp_status "$HP_COMPONENT" failed "$reason" "$message" "${recovery:-$0}"
}

# hp_native_build <key>: the component's native part, built or restored, recorded in its status.
# A component script may define hp_verify_install, run on the install whether built or restored:
# its failure (reported on stderr as hp_status_from_error reads it) fails the component.
hp_native_build() {
    local key="$1" rc=0 how err
    hp_cmake_build_cached "$key" || rc=$?
    if ((rc == 0)) && declare -F hp_verify_install >/dev/null && ! err="$(hp_verify_install 2>&1 >>"$HP_LOG")"; then
        hp_status_from_error "$err"
    elif ((rc == 0)); then
        how="built"
        ((HP_CACHE_HIT)) && how="restored from cache $HP_CACHE_DIR/$HP_COMPONENT/$key"
        hp_status "$HP_COMPONENT" ok - "$how"
        hp_info "$HP_COMPONENT: $how"
    else
        hp_status "$HP_COMPONENT" failed HP-BUILD-COMPILE-FAILED \
            "configure/build/install step failed (rc $rc)" "scripts/build_$HP_COMPONENT.sh --jobs $HP_JOBS"
        tail -n 30 "$HP_LOG" >&2
    fi
}

# CMake keeps the compiler and flags of the first configure: a work dir configured with another
# toolchain identity is removed before it is reused.
hp_reset_work_dir_if_toolchain_changed() {
    local stamp="$HP_WORK_DIR/.hp-toolchain" id
    id="$(hp_toolchain_identity | sha256sum)"
    if [[ -f "$stamp" && "$(cat "$stamp")" != "$id" ]]; then
        echo "toolchain changed: removing $HP_WORK_DIR" >>"$HP_LOG"
        rm -rf "$HP_WORK_DIR"
    fi
    mkdir -p "$HP_WORK_DIR"
    printf '%s' "$id" >"$stamp"
}

# The standard CMake arguments for this component (components with kernels add
# -DHP_SOC_LIST themselves: the core's cache key must not depend on the SoC list).
hp_default_cmake_args() {
    HP_CMAKE_ARGS=(
        -DHP_COMPONENT="$HP_COMPONENT"
        -DCMAKE_BUILD_TYPE=RelWithDebInfo
        -DHP_PYTHON="$HP_PYTHON"
        -DHP_SANITIZE="${HP_SANITIZE:-}"
        # A sanitizer build serves its tests only (scripts/run_tests.sh); its CPython
        # extensions only when HP_SANITIZE_PYTHON=1 (scripts/build_fuzzers.sh).
        -DHP_BUILD_BENCH="$([[ -n "${HP_SANITIZE:-}" ]] && echo OFF || echo ON)"
        -DHP_BUILD_PYTHON="$([[ -n "${HP_SANITIZE:-}" && "${HP_SANITIZE_PYTHON:-0}" != 1 ]] && echo OFF || echo ON)"
        # The fuzz targets (scripts/build_fuzzers.sh); HP_BUILD_TESTS=0 leaves the tests out.
        -DHP_FUZZ="$([[ "${HP_FUZZ:-0}" == 1 ]] && echo ON || echo OFF)"
        -DHP_BUILD_TESTS="$([[ "${HP_BUILD_TESTS:-1}" == 0 ]] && echo OFF || echo ON)"
        -DHP_WERROR="$([[ "${HP_WERROR:-0}" =~ ^(1|on|ON|true|yes)$ ]] && echo ON || echo OFF)"
        -DCMAKE_CXX_COMPILER="$HP_CXX"
    )
}

# Copies this component's slice and tests from its install dir into the payload (replacing
# only this slice) and records its status in the payload manifest.
hp_refresh_payload_slice() {
    local slice="$HP_INSTALL_DIR/hyper_parallel/$HP_COMPONENT"
    local staged="$HP_NATIVE_DIR/.slice.$HP_COMPONENT.new" old="$HP_NATIVE_DIR/.slice.$HP_COMPONENT.old"
    [[ -d "$slice" ]] || return 0
    mkdir -p "$HP_BUILD_PAYLOAD" "$HP_TESTS_DIR"
    rm -rf "$staged" "$old"
    cp -a "$slice" "$staged"
    [[ -e "$HP_BUILD_PAYLOAD/$HP_COMPONENT" ]] && mv "$HP_BUILD_PAYLOAD/$HP_COMPONENT" "$old"
    mv "$staged" "$HP_BUILD_PAYLOAD/$HP_COMPONENT"
    rm -rf "$old" "$HP_TESTS_DIR/$HP_COMPONENT"
    [[ -d "$HP_INSTALL_DIR/tests/$HP_COMPONENT" ]] && cp -a "$HP_INSTALL_DIR/tests/$HP_COMPONENT" "$HP_TESTS_DIR/"
    local socs=()  # only a component with kernels changes the payload's SoC list
    [[ "$HP_COMPONENT" == multicore ]] && socs=(--soc-list "$(IFS=,; echo "${HP_SOCS[*]}")")
    "$HP_PYTHON" "$HP_REPO_ROOT/scripts/assemble_payload.py" update-manifest \
        --native-dir "$HP_NATIVE_DIR" --python "$HP_PYTHON" "${socs[@]}" "$HP_STATUS_FILE"
    hp_info "$HP_COMPONENT: payload slice refreshed: $HP_BUILD_PAYLOAD/$HP_COMPONENT"
}

# Ends the script: refreshes the payload slice unless --no-payload, exits 0 when the native
# part of the component built.
hp_component_end() {
    local native_state
    native_state="$(awk -F'\t' -v p="$HP_COMPONENT" '$1 == p {print $2}' "$HP_STATUS_FILE")"
    if [[ "$native_state" == ok ]] && ((!HP_NO_PAYLOAD)); then
        hp_refresh_payload_slice
    fi
    [[ "$native_state" == ok ]]
}

# A component whose sources are not in this checkout: every part fails optionally.
hp_sources_missing() {
    local dir="$1"
    hp_status "$HP_COMPONENT" failed HP-BUILD-SOURCES-MISSING \
        "the $HP_COMPONENT sources ($dir) are not in this checkout yet" \
        "./build.sh $2"
}
