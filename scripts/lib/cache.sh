# Heavy component caches (sourced, never executed).
#
# An entry is $HP_CACHE_DIR/<component>/<key>/{install/, files.sha256, .complete}. The key is a
# SHA-256 over everything that changes the install: the component's source files (names and
# contents), the toolchain identity (C and C++ compilers, CXXFLAGS/CFLAGS/CPPFLAGS/LDFLAGS,
# CMake version), the CMake arguments, the Python interpreter and ABI, and the installed
# versions of the locked Debian packages. A restore verifies every file against files.sha256;
# restore, store and prune hold an flock on the component's cache dir, and an entry's mtime is
# refreshed on every hit (the newest four are kept).

hp_toolchain_identity() {
    printf 'cxx=%s\n' "$HP_CXX"
    "$HP_CXX" --version | head -n1
    printf 'cc=%s\n' "$(command -v "${CC:-cc}")"
    "${CC:-cc}" --version | head -n1
    printf 'CXXFLAGS=%s\nCFLAGS=%s\nCPPFLAGS=%s\nLDFLAGS=%s\n' "${CXXFLAGS:-}" "${CFLAGS:-}" \
        "${CPPFLAGS:-}" "${LDFLAGS:-}"
    cmake --version | head -n1
}

# hp_build_key [--exclude <path>]... <source paths relative to the repo...>: prints the key.
# Excluded paths (e.g. framework adapters, rebuilt clean every time anyway) do not count.
hp_build_key() {
    local sources deps python toolchain prune=()
    while [[ "${1:-}" == --exclude ]]; do
        prune+=(-path "$2" -prune -o)
        shift 2
    done
    # Documents and recorded results (README, RESULTS.md, plots, JSON lines) build nothing.
    sources="$(cd "$HP_REPO_ROOT" && find "$@" "${prune[@]}" -type f ! -name '*.pyc' ! -name '*.md' \
        ! -name '*.png' ! -name '*.jsonl' -print0 | sort -z |
        xargs -0 sha256sum)"
    toolchain="$(hp_toolchain_identity)"
    deps="$(awk '!/^#/ && NF {print $1}' "$HP_REPO_ROOT/deps/host-packages.lock" |
        xargs dpkg-query -W -f='${Package} ${Version}\n')"
    python="$("$HP_PYTHON" -c 'import sys, sysconfig; print(sys.executable, sys.version, sysconfig.get_config_var("SOABI"))')"
    # The install is stripped by split_debug.py: its version is part of every key.
    printf '%s\n' "$sources" "$toolchain" "$deps" "$python" "${HP_CMAKE_ARGS[@]}" \
        "$(sha256sum <"$HP_REPO_ROOT/scripts/split_debug.py")" |
        sha256sum | cut -c1-32
}

# Runs "$@" holding the component's cache lock.
hp_with_cache_lock() {
    local dir="$HP_CACHE_DIR/$HP_COMPONENT"
    mkdir -p "$dir" || return 1
    (
        flock -w 600 9 || { echo "cannot lock $dir/.lock"; exit 1; }
        "$@"
    ) 9>"$dir/.lock"
}

# hp_cache_restore <key> <install dir>: 0 when a verified entry was copied into place.
hp_cache_restore() {
    local entry="$HP_CACHE_DIR/$HP_COMPONENT/$1"
    [[ -f "$entry/.complete" ]] || return 1
    hp_with_cache_lock hp_cache_restore_locked "$entry" "$2"
}

hp_cache_restore_locked() {
    local entry="$1" install="$2"
    if ! (cd "$entry/install" && sha256sum --quiet --strict -c ../files.sha256); then
        echo "cache entry $entry failed verification: removing it and rebuilding"
        rm -rf "$entry"
        return 1
    fi
    rm -rf "$install.restoring" &&
        cp -a "$entry/install" "$install.restoring" &&
        rm -rf "$install" &&
        mv "$install.restoring" "$install" &&
        touch "$entry" || return 1
    echo "restored from cache $entry"
}

# hp_cache_store <key> <install dir>: stores a fresh install, then prunes.
hp_cache_store() {
    local dir="$HP_CACHE_DIR/$HP_COMPONENT" tmp
    mkdir -p "$dir" || return 1
    tmp="$(mktemp -d "$dir/.store.XXXXXX")" || return 1
    cp -a "$2" "$tmp/install" &&
        (cd "$tmp/install" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$tmp/files.sha256" &&
        touch "$tmp/.complete" || { rm -rf "$tmp"; return 1; }
    hp_with_cache_lock hp_cache_store_locked "$tmp" "$dir/$1"
}

hp_cache_store_locked() {
    local tmp="$1" entry="$2"
    rm -rf "$entry" && mv "$tmp" "$entry" || return 1
    # Prune: keep the four most recently used entries (hidden files are not entries).
    (cd "$(dirname "$entry")" && ls -1t | tail -n +5 | xargs -r rm -rf)
}
