#!/usr/bin/env bash
# Builds the multicore component (native/moe with the per-SoC kernel vendor) and its
# framework adapters. See scripts/lib/component.sh for the arguments and the status protocol.
set -euo pipefail
HP_COMPONENT=multicore
source "$(dirname "${BASH_SOURCE[0]}")/lib/component.sh"
hp_component_parse_args "$@"
hp_component_begin

if [[ ! -f "$HP_REPO_ROOT/native/moe/CMakeLists.txt" ]]; then
    hp_sources_missing native/moe "--multicore off"
fi

for soc in "${HP_SOCS[@]}"; do
    if [[ "$soc" == sm_90 ]]; then
        hp_status "$HP_COMPONENT.vendor.$soc" failed HP-BUILD-SOC-UNSUPPORTED \
            "sm_90 (CUDA Hopper) is a reserved target: its kernels are not implemented yet" \
            "./build.sh --soc-list x86_64_v3,x86_64_v4,x86_64_amx"
    fi
done
buildable_adapters=($(hp_framework_adapters native/moe/adapters "./build.sh --multicore off"))
hp_component_end
