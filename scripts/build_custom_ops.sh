#!/usr/bin/env bash
# Builds the custom_ops component (native/ops, docs/ops.md): checks the operator registry,
# selects the ops (scripts/select_ops.py), builds or restores the op objects, the lookup library
# and hp-ops (cached: the selection never recompiles), links the op package's library exporting
# exactly the selected ops, verifies it and writes its ops.json. See scripts/lib/component.sh for
# the common arguments and the status protocol.
set -euo pipefail
HP_COMPONENT=custom_ops
hp_component_extra_usage="  --ops LIST      the ops to package (comma list of registry names; default: every op
                  for the SoC targets, one variant per family)
  --w4a8          the w4a8 variant of the fused_deep_moe family instead of base
  --shmem-variant the shmem variant of the fused_deep_moe family instead of base
  --registry FILE the operator registry (default: native/ops/operator_registry.json)
  --shmem-sdk DIR|none
                  the SHMEM SDK that ops with requires_shmem compile against (default: this
                  build's symmetric_memory install when it built; \$HP_SHMEM_HOME overrides both);
                  without one those ops are dropped with a NOTE"
source "$(dirname "${BASH_SOURCE[0]}")/lib/component.sh"

registry="$HP_REPO_ROOT/native/ops/operator_registry.json"
select_args=() common_args=() sdk_arg=
while (($#)); do
    case "$1" in
        --ops) [[ $# -ge 2 ]] || hp_die 2 HP-BUILD-USAGE "--ops needs a comma list of ops"
               select_args+=(--ops "$2"); shift 2; continue ;;
        --ops=*) select_args+=(--ops "${1#*=}") ;;
        --w4a8|--shmem-variant) select_args+=("$1") ;;
        --registry) [[ $# -ge 2 ]] || hp_die 2 HP-BUILD-USAGE "--registry needs a file"
                    registry="$2"; shift 2; continue ;;
        --registry=*) registry="${1#*=}" ;;
        --shmem-sdk) [[ $# -ge 2 ]] || hp_die 2 HP-BUILD-USAGE "--shmem-sdk needs a directory or none"
                     sdk_arg="$2"; shift 2; continue ;;
        --shmem-sdk=*) sdk_arg="${1#*=}" ;;
        *) common_args+=("$1") ;;
    esac
    shift
done
hp_component_parse_args "${common_args[@]}"
hp_component_begin

core_config="$HP_NATIVE_DIR/core/install/hyper_parallel/core/lib/cmake/HyperParallel"
shmem_install="$HP_NATIVE_DIR/symmetric_memory/install/hyper_parallel/symmetric_memory"
multicore_install="$HP_NATIVE_DIR/multicore/install/hyper_parallel/multicore"
shmem_targets="$shmem_install/lib/cmake/HyperParallel/HyperParallelSymmetricMemoryTargets.cmake"
multicore_targets="$multicore_install/lib/cmake/HyperParallel/HyperParallelMulticoreTargets.cmake"
selection="$HP_WORK_DIR/selection.json"
version_script="$HP_WORK_DIR/ops.map"
package_dir="$HP_INSTALL_DIR/hyper_parallel/custom_ops"

# built_ok <component>: that component's native part built in this build dir.
built_ok() {
    awk -F'\t' -v p="$1" '$1 == p && $2 == "ok" {found = 1} END {exit !found}' \
        "$HP_NATIVE_DIR/$1/status.tsv" 2>/dev/null
}

# package_link: the op package's library, from the op objects: exactly the selected ops
# exported (the version script), every other op local and dropped (--gc-sections). A link, not a
# compile. The libraries it needs and its RUNPATH are those of the all-ops library CMake linked
# beside the objects (the same inputs; one source of the link line).
package_link() {
    local all_ops="$HP_INSTALL_DIR/objects/libhyper_parallel_op_api.so" out needed runpath
    out="$package_dir/lib/libhyper_parallel_op_api.so"
    # clang's sanitizer runtime (a fuzz build: scripts/build_fuzzers.sh) is not among the
    # libraries named: -shared-libsan links it, as cmake/HpToolchain.cmake does for CMake's links.
    needed=($(readelf -d "$all_ops" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^libclang_rt\.'))
    runpath="$(readelf -d "$all_ops" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
    local sanitize=()
    if [[ -n "${HP_SANITIZE:-}" ]]; then
        sanitize=(-fsanitize="$HP_SANITIZE")
        [[ "$("$HP_CXX" --version)" == *clang* ]] && sanitize+=(-shared-libsan)
    fi
    echo "== package ($(date -Is)): $(tr '\n' ' ' <<<"$ops")"
    mkdir -p "$package_dir/lib" &&
        "$HP_CXX" -shared -o "$out" -Wl,-soname,libhyper_parallel_op_api.so \
            -Wl,--whole-archive "$objects" -Wl,--no-whole-archive -Wl,--version-script="$version_script" \
            -Wl,--gc-sections -Wl,--no-undefined -Wl,--enable-new-dtags -Wl,-rpath,"$runpath" \
            -L"$HP_NATIVE_DIR/core/install/hyper_parallel/core/lib" -L"$shmem_install/lib" -L"$multicore_install/lib" \
            "${needed[@]/#/-l:}" "${sanitize[@]}" &&
        hp_split_debug "$package_dir"
}

# merge_vendor: the unified vendor (scripts/vendor_merge.py): the kernel targets built and the op
# package's library as the host of each (one build links one host), into vendor.json.
merge_vendor() {
    local kernels="$multicore_install/lib/kernels" built=() hosts=() soc
    for soc in "${HP_SOCS[@]}"; do
        [[ -f "$kernels/libhyper_parallel_kernels_$soc.so" ]] || continue
        built+=("$soc")
        hosts+=(--host "$soc=$package_dir/lib/libhyper_parallel_op_api.so")
    done
    "$HP_PYTHON" "$HP_REPO_ROOT/scripts/vendor_merge.py" merge --kernels "$kernels" \
        --targets "$(IFS=,; echo "${built[*]}")" "${hosts[@]}" --out "$package_dir/vendor.json"
}

# The SHMEM SDK root: HP_SHMEM_HOME (select_ops.py reads it), else this build's symmetric memory.
sdk="$sdk_arg"
if [[ -z "$sdk" ]]; then
    sdk=none
    built_ok symmetric_memory && [[ -d "$shmem_install" ]] && sdk="$shmem_install"
fi
socs_csv="$(IFS=,; echo "${HP_SOCS[*]}")"
select_cmd=("$HP_PYTHON" "$HP_REPO_ROOT/scripts/select_ops.py" select --registry "$registry"
            --known-socs "$(IFS=,; echo "${HP_ALL_SOCS[*]}")" --soc-list "$socs_csv" --shmem-sdk "$sdk"
            "${select_args[@]}" --out "$selection" --version-script "$version_script")
echo "== select: ${select_cmd[*]}" >>"$HP_LOG"
selected=0
if ops="$("${select_cmd[@]}" 2>"$HP_WORK_DIR/select.err")"; then
    selected=1
    tee -a "$HP_LOG" <"$HP_WORK_DIR/select.err" >&2  # the SHMEM filter's NOTE lines
    hp_info "custom_ops: selected $(tr '\n' ' ' <<<"$ops")"
else
    hp_status_from_error "$(cat "$HP_WORK_DIR/select.err")"
fi
if ((!selected)); then
    :
elif [[ ! -f "$core_config/HyperParallelConfig.cmake" ]]; then
    hp_status "$HP_COMPONENT" failed HP-BUILD-DEPENDENCY-MISSING \
        "the core install it links ($core_config) does not exist" "scripts/build_core.sh && $0"
elif [[ ! -f "$shmem_targets" || ! -f "$multicore_targets" ]]; then
    hp_status "$HP_COMPONENT" failed HP-BUILD-DEPENDENCY-MISSING \
        "the ops run on the MoE layer and symmetric memory: the multicore and symmetric_memory installs ($multicore_install, $shmem_install) must exist" \
        "./build.sh --multicore torch --custom-ops on"
else
    hp_default_cmake_args
    include_dirs="$("$HP_PYTHON" -c 'import json, sys; print(";".join(json.load(open(sys.argv[1]))["shmem_include_dirs"]))' "$selection")"
    # The key covers the sources and the SDK's headers, not the installs' paths (they differ per build dir).
    sdk_id=none
    [[ -n "$include_dirs" ]] && sdk_id="$(cd "${include_dirs%%;*}" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32)"
    HP_CMAKE_ARGS+=(-DHP_OPS_SHMEM_SDK_ID="$sdk_id")
    key="$(hp_build_key --exclude native/moe/adapters --exclude native/shmem/adapters VERSION CMakeLists.txt cmake \
        native/common native/platform native/shmem native/kernels \
        native/moe native/ops/CMakeLists.txt native/ops/op_api native/ops/op_lookup.h native/ops/op_lookup.cpp \
        native/ops/tools tests/common tests/ops tests/moe/layer_weights.h tests/moe/routing_inputs.h tests/shmem/scenario.h tests/fuzz)"
    HP_CMAKE_ARGS+=(-DHyperParallel_DIR="$core_config" -DHP_SHMEM_TARGETS="$shmem_targets"
        -DHP_MULTICORE_TARGETS="$multicore_targets" -DHP_OPS_SHMEM_INCLUDE_DIRS="$include_dirs")
    objects="$HP_INSTALL_DIR/objects/libhp_op_api_objects.a"
    verify=("$HP_PYTHON" "$HP_REPO_ROOT/scripts/select_ops.py" verify --selection "$selection" --objects "$objects")
    rc=0
    hp_cmake_build_cached "$key" || rc=$?
    if ((rc != 0)); then
        hp_status "$HP_COMPONENT" failed HP-BUILD-COMPILE-FAILED "configure/build/install step failed (rc $rc)" \
            "scripts/build_$HP_COMPONENT.sh --jobs $HP_JOBS"
        tail -n 30 "$HP_LOG" >&2
    elif ! "${verify[@]}" 2>"$HP_WORK_DIR/verify.err"; then
        hp_status_from_error "$(cat "$HP_WORK_DIR/verify.err")"
    elif ! package_link >>"$HP_LOG" 2>&1; then
        hp_status "$HP_COMPONENT" failed HP-BUILD-COMPILE-FAILED "linking the op package failed" \
            "scripts/build_$HP_COMPONENT.sh --jobs $HP_JOBS"
        tail -n 30 "$HP_LOG" >&2
    elif ! "${verify[@]}" --library "$package_dir/lib/libhyper_parallel_op_api.so" --ops-json "$package_dir/ops.json" \
            --kernels "$multicore_install/lib/kernels" --version "$(cat "$HP_REPO_ROOT/VERSION")" --build-dir "$HP_BUILD_DIR" \
            2>"$HP_WORK_DIR/verify.err"; then
        hp_status_from_error "$(cat "$HP_WORK_DIR/verify.err")"
    elif ! merge_vendor >>"$HP_LOG" 2>"$HP_WORK_DIR/merge.err"; then
        hp_status_from_error "$(cat "$HP_WORK_DIR/merge.err")"
    else
        how="built"
        ((HP_CACHE_HIT)) && how="objects restored from cache $HP_CACHE_DIR/$HP_COMPONENT/$key"
        hp_status "$HP_COMPONENT" ok - "$how; package of $(wc -l <<<"$ops") ops"
        hp_info "$HP_COMPONENT: $how; package: $package_dir"
    fi
fi
hp_component_end
