#!/usr/bin/env bash
# Builds the multicore component: native/kernels (the front end and one kernel library per
# SoC target of --soc-list: the vendor), native/moe (MoE dispatch/combine, on the
# symmetric_memory install) and its framework adapters. Each SoC target gets its
# own status line (multicore.vendor.<soc>). See scripts/lib/component.sh for the arguments
# and the status protocol.
set -euo pipefail
HP_COMPONENT=multicore
source "$(dirname "${BASH_SOURCE[0]}")/lib/component.sh"
hp_component_parse_args "$@"
hp_component_begin

core_config="$HP_NATIVE_DIR/core/install/hyper_parallel/core/lib/cmake/HyperParallel"
shmem_install="$HP_NATIVE_DIR/symmetric_memory/install/hyper_parallel/symmetric_memory"
shmem_targets="$shmem_install/lib/cmake/HyperParallel/HyperParallelSymmetricMemoryTargets.cmake"
cpu_socs=()
for soc in "${HP_SOCS[@]}"; do [[ "$(hp_soc_kind "$soc")" != cpu ]] || cpu_socs+=("$soc"); done
all_cpu_socs="$(hp_soc_names cpu)"
if [[ ! -f "$HP_REPO_ROOT/native/kernels/CMakeLists.txt" ]]; then
    hp_sources_missing native/kernels "--multicore off"
elif [[ ! -f "$core_config/HyperParallelConfig.cmake" ]]; then
    hp_status "$HP_COMPONENT" failed HP-BUILD-DEPENDENCY-MISSING \
        "the core install it links ($core_config) does not exist" "scripts/build_core.sh && $0"
elif [[ ! -f "$shmem_targets" ]]; then
    hp_status "$HP_COMPONENT" failed HP-BUILD-DEPENDENCY-MISSING \
        "the symmetric_memory install it links ($shmem_install) does not exist" \
        "scripts/build_symmetric_memory.sh && $0"
elif ((${#cpu_socs[@]} == 0)); then
    hp_status "$HP_COMPONENT" failed HP-BUILD-SOC-UNSUPPORTED \
        "--soc-list $(IFS=,; echo "${HP_SOCS[*]}") names no CPU target: the kernels have nothing to build" \
        "./build.sh --soc-list $all_cpu_socs"
else
    hp_default_cmake_args
    HP_CMAKE_ARGS+=(-DHP_SOC_LIST="$(IFS=';'; echo "${cpu_socs[*]}")")
    # The key covers the sources the installs it links were built from, not the installs' paths
    # (they differ per build dir).
    key="$(hp_build_key --exclude native/moe/adapters --exclude native/shmem/adapters VERSION CMakeLists.txt \
        cmake native/common native/platform native/shmem \
        native/kernels native/moe tests/kernels tests/moe bench/CMakeLists.txt bench/common bench/kernels \
        bench/moe_comm bench/moe_layer tests/common tests/shmem/scenario.h python/bindings tests/fuzz)"
    HP_CMAKE_ARGS+=(-DHyperParallel_DIR="$core_config" -DHP_SHMEM_TARGETS="$shmem_targets")
    # The per-target results of the configure step, kept in the install so a cache hit has them.
    hp_check_install() {
        cp "$HP_WORK_DIR/soc_status.txt" "$HP_INSTALL_DIR/soc_status.txt"
    }
    # The targets built are one vendor (scripts/vendor_merge.py): checked on every install, built
    # or restored. The custom_ops build merges them with its host op-API library into vendor.json.
    hp_verify_install() {
        local built
        built="$(awk '$2 == "ok" {print $1}' "$HP_INSTALL_DIR/soc_status.txt" | paste -sd,)"
        [[ -z "$built" ]] && return 0
        "$HP_PYTHON" "$HP_REPO_ROOT/scripts/vendor_merge.py" merge --targets "$built" \
            --kernels "$HP_INSTALL_DIR/hyper_parallel/multicore/lib/kernels"
    }
    hp_native_build "$key"
fi

native_state="$(hp_component_state)"
for soc in "${HP_SOCS[@]}"; do
    part="$HP_COMPONENT.vendor.$soc"
    if [[ "$(hp_soc_kind "$soc")" == reserved ]]; then
        hp_status "$part" failed HP-BUILD-SOC-UNSUPPORTED \
            "$soc is a reserved target (native/common/soc_targets.tsv): its kernels are not implemented yet" \
            "./build.sh --soc-list $all_cpu_socs"
    elif [[ "$native_state" != ok ]]; then
        hp_status "$part" failed HP-BUILD-DEPENDENCY-MISSING "the multicore component failed (its own line says why)" "$0"
    elif grep -qx "$soc ok" "$HP_INSTALL_DIR/soc_status.txt" 2>/dev/null; then
        hp_status "$part" ok - "built libhyper_parallel_kernels_$soc.so"
    else
        hp_status "$part" failed HP-BUILD-SOC-UNSUPPORTED \
            "the compiler ($HP_CXX) cannot build the $soc target's instructions" \
            "apt-get install -y g++ (GCC >= 11 for AMX), then $0 --soc-list $soc"
    fi
done

hp_build_adapters native/moe/adapters "./build.sh --multicore off"
hp_component_end
