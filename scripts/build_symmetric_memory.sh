#!/usr/bin/env bash
# Builds the symmetric_memory component (native/shmem) and its framework adapters. See
# scripts/lib/component.sh for the arguments and the status protocol.
set -euo pipefail
HP_COMPONENT=symmetric_memory
source "$(dirname "${BASH_SOURCE[0]}")/lib/component.sh"
hp_component_parse_args "$@"
hp_component_begin

if [[ ! -f "$HP_REPO_ROOT/native/shmem/CMakeLists.txt" ]]; then
    hp_sources_missing native/shmem "--shmem off --multicore off"
fi

buildable_adapters=($(hp_framework_adapters native/shmem/adapters "./build.sh --shmem off --multicore off"))
hp_component_end
