#!/usr/bin/env python3
# The locator of an installed HyperParallel wheel: pip puts it in the environment's bin/ and
# rewrites the line above to the interpreter it installed for (a wheel's scripts start with
# "#!python"). Sourcing it finds that interpreter's hyper_parallel package without importing it
# and sources the payload's activation, multicore/lib/set_env.bash, with the same arguments:
#
#   source "$(command -v hyper_parallel_multicore_set_env.bash)" [--verbose] [--chip-cpus LIST] [VENDOR_DIR ...]
#
# Source it before the framework (torch) starts. pip uninstall removes it (the wheel's RECORD).
if ! (return 0 2>/dev/null); then
    echo "hyper_parallel_multicore_set_env.bash must be sourced, not executed:" >&2
    echo "  source \"\$(command -v hyper_parallel_multicore_set_env.bash)\"" >&2
    exit 2
fi
__hp_locate() {
    local python package
    python="$(head -n1 "${BASH_SOURCE[0]}")"
    python="${python#\#!}"
    python="${python#/usr/bin/env }"
    package="$("$python" -c 'import importlib.util, sys
spec = importlib.util.find_spec("hyper_parallel")
sys.exit(1) if spec is None else print(spec.submodule_search_locations[0])' 2>/dev/null)" || {
        echo "hyper_parallel_multicore_set_env.bash: $python does not see the hyper_parallel package: pip install the wheel for it" >&2
        return 2
    }
    if [[ ! -f "$package/multicore/lib/set_env.bash" ]]; then
        echo "hyper_parallel_multicore_set_env.bash: HP-NATIVE-PAYLOAD-MISSING: $package has no multicore payload (a core-only wheel): install a wheel built by ./build.sh with multicore" >&2
        return 2
    fi
    echo "$package/multicore/lib/set_env.bash"
}
if __hp_set_env="$(__hp_locate)"; then
    unset -f __hp_locate
    if source "$__hp_set_env" "$@"; then
        unset __hp_set_env
        return 0
    fi
fi
unset -f __hp_locate
unset __hp_set_env
return 2
