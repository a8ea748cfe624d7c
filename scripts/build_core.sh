#!/usr/bin/env bash
# Builds the core component (native/common, native/platform, native/runtime, the runtime's
# examples, the Python extension modules and their tests). Not optional: every other component links against it. See
# scripts/lib/component.sh for the arguments and the status protocol.
set -euo pipefail
HP_COMPONENT=core
source "$(dirname "${BASH_SOURCE[0]}")/lib/component.sh"
hp_component_parse_args "$@"
hp_component_begin
hp_default_cmake_args

key="$(hp_build_key --exclude native/runtime/node --exclude tests/runtime/node VERSION CMakeLists.txt cmake native/common native/platform native/runtime \
    python/bindings tests/common tests/platform tests/runtime bench/CMakeLists.txt bench/common bench/platform \
    bench/runtime examples/cpp_consumer examples/runtime tests/fuzz)"
# A C++ user's view of the install: find_package(HyperParallel) from the core slice.
hp_check_install() {
    [[ -n "${HP_SANITIZE:-}" ]] && return 0  # the regular build checks the install
    local consumer="$HP_WORK_DIR/cpp_consumer"
    cmake -S "$HP_REPO_ROOT/examples/cpp_consumer" -B "$consumer" -G Ninja \
        -DCMAKE_PREFIX_PATH="$HP_INSTALL_DIR/hyper_parallel/core" &&
        cmake --build "$consumer" && "$consumer/hp_consumer"
}

hp_native_build "$key"
hp_component_end
