#!/usr/bin/env bash
# Builds the custom_ops component (native/ops: operator registry, selection, two-phase op
# ABI). See scripts/lib/component.sh for the arguments and the status protocol.
set -euo pipefail
HP_COMPONENT=custom_ops
source "$(dirname "${BASH_SOURCE[0]}")/lib/component.sh"
hp_component_parse_args "$@"
hp_component_begin

if [[ ! -f "$HP_REPO_ROOT/native/ops/CMakeLists.txt" ]]; then
    hp_sources_missing native/ops "--custom-ops off"
fi
hp_component_end
