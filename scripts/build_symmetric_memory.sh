#!/usr/bin/env bash
# Builds the symmetric_memory component (native/shmem, and the runtime's node level over it:
# native/runtime/node) and its framework adapters. See
# scripts/lib/component.sh for the arguments and the status protocol.
set -euo pipefail
HP_COMPONENT=symmetric_memory
source "$(dirname "${BASH_SOURCE[0]}")/lib/component.sh"
hp_component_parse_args "$@"
hp_component_begin

core_config="$HP_NATIVE_DIR/core/install/hyper_parallel/core/lib/cmake/HyperParallel"
if [[ ! -f "$HP_REPO_ROOT/native/shmem/CMakeLists.txt" ]]; then
    hp_sources_missing native/shmem "--shmem off --multicore off"
elif [[ ! -f "$core_config/HyperParallelConfig.cmake" ]]; then
    hp_status "$HP_COMPONENT" failed HP-BUILD-DEPENDENCY-MISSING \
        "the core install it links ($core_config) does not exist" "scripts/build_core.sh && $0"
else
    hp_default_cmake_args
    # The key covers the core's sources instead of its install path, which differs per build dir.
    key="$(hp_build_key --exclude native/shmem/adapters VERSION CMakeLists.txt cmake native/common native/platform \
        native/runtime native/shmem \
        python/bindings tests/common tests/shmem tests/runtime/node bench/CMakeLists.txt bench/common bench/shmem \
        bench/runtime/bench_node.cpp tests/fuzz)"
    HP_CMAKE_ARGS+=(-DHyperParallel_DIR="$core_config")
    hp_native_build "$key"
fi

hp_build_adapters native/shmem/adapters "./build.sh --shmem off --multicore off"
hp_component_end
