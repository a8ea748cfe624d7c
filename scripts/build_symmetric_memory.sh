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

for fw in "${HP_FRAMEWORKS[@]}"; do
    hp_check_framework "$fw" || continue
    hp_status "$HP_COMPONENT.$fw" failed HP-BUILD-SOURCES-MISSING \
        "the $fw adapter of symmetric memory is not in this checkout yet" "./build.sh --shmem off --multicore off"
done
hp_component_end
