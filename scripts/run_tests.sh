#!/usr/bin/env bash
# All of HyperParallel's tests, against what ./build.sh produced (tests never compile):
#   0. the C/C++ format check (scripts/check_format.sh)
#   1. ./build.sh (default selection; incremental) with warnings as errors
#   2. the clang build of scripts/build_fuzzers.sh (build/fuzz: AddressSanitizer + UBSan +
#      libFuzzer's coverage; core and symmetric_memory with their tests, multicore and
#      custom_ops libraries, the CPython extensions without torch adapters, the fuzz targets),
#      and core and symmetric_memory again with ThreadSanitizer (the same clang,
#      build/sanitize-thread); no benchmarks
#   3. ctest over build/native/tests (labels unit, multirank, slow, multihost); the TSan
#      payload's unit tests; the ASan + UBSan payload's unit and multirank tests (the mpirun-
#      launched runs without the leak check: Open MPI leaks in components it unloads before
#      LeakSanitizer looks, so those leaks cannot be told from ours; every other run leak-checks,
#      tests/sanitizers/lsan.supp suppressing only Open MPI's libraries). Two tests at a time
#      (one per CPU), the multihost ones alone.
#   4. every fuzz target for 12 s, one per CPU at a time (scripts/fuzz.sh --all 12), from its
#      seed corpus and regression inputs; the fused layer's soak, 500 iterations forward and
#      backward on 4 ranks in the ASan build (scripts/soak.sh 500; 10000 by default)
#   5. pytest: tests/python and tests/build, a test file per CPU at a time (pytest-xdist), the
#      multihost ones (hosts of network namespaces) alone after them
#   6. pytest again on the ASan + UBSan payload, with clang's ASan runtime preloaded into the
#      interpreter (and so into hprun and every PE it starts): the tests that drive native code
#      through the CPython extensions and the payload's programs (asan_python_tests below), a
#      file per CPU at a time.
#      Without the leak check: CPython does not free its own objects at exit; the native code's
#      leaks are the ctests' and the soak's to find.
# Chosen to keep CI under 30 minutes on 2 cores: multihost runs, the build tests and the tests
# that need the torch adapters, the examples or a wheel are not repeated under a sanitizer, nor
# are the resident-memory tests (ASan's quarantine holds freed memory); each fuzz target gets
# 12 s (scripts/fuzz.sh NAME SECONDS for longer). Arguments are passed to the first pytest
# and multihost pytest runs (e.g. -k wheel). .ci/run runs exactly this.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
export HP_WERROR="${HP_WERROR:-1}"
failed=()

"$HP_REPO_ROOT/build.sh"
# After the build: it installs the locked formatter on a fresh host.
"$HP_REPO_ROOT/scripts/check_format.sh" || failed+=(format)
source "$HP_REPO_ROOT/scripts/lib/python.sh"
source "$HP_REPO_ROOT/scripts/lib/sanitizers.sh"
hp_select_python

# AddressSanitizer + UndefinedBehaviorSanitizer: the clang build that also holds the fuzz targets
# (it installs clang 16 first: deps/fuzz-packages.lock).
"$HP_REPO_ROOT/scripts/build_fuzzers.sh" --jobs "$(hp_nproc)"

# ThreadSanitizer, with the same clang: it compiles these components in two thirds of GCC's
# time.
hp_info "building core and symmetric_memory with ThreadSanitizer"
tsan_dir="$HP_BUILD_DIR/sanitize-thread"
for component in core symmetric_memory; do
    env "${hp_clang_build_env[@]}" HP_SANITIZE=thread \
        HP_BUILD_DIR="$tsan_dir" HP_CACHE_DIR="$tsan_dir/native/cache" \
        "$HP_REPO_ROOT/scripts/build_$component.sh" --jobs "$(hp_nproc)"
done

# A sanitizer run proves nothing unless the payload it tests is instrumented: the platform
# library of each build, and every CPython extension of the clang one.
require_instrumented() {  # FILE SYMBOL-PREFIX SANITIZER BUILD-DIR
    [[ "$(nm -D "$1" | grep -c "$2")" -gt 0 ]] ||
        hp_die 1 HP-TESTS-NOT-SANITIZED "$1 is not built with $3" "rm -rf $4"
}
platform_lib=native/payload/hyper_parallel/core/lib/libhyper_parallel_platform.so
require_instrumented "$tsan_dir/$platform_lib" __tsan_ ThreadSanitizer "$tsan_dir"
require_instrumented "$HP_FUZZ_DIR/$platform_lib" __asan_ AddressSanitizer "$HP_FUZZ_DIR"
require_instrumented "$HP_FUZZ_DIR/$platform_lib" __ubsan_ UndefinedBehaviorSanitizer "$HP_FUZZ_DIR"
for module in "$HP_FUZZ_DIR"/native/payload/hyper_parallel/*/python/*.so; do
    require_instrumented "$module" __asan_ AddressSanitizer "$HP_FUZZ_DIR"
done

# Jobs must leave no shared memory behind (hprun and the PEs unlink every /dev/shm/hp.* object).
shm_before="$(ls /dev/shm | grep '^hp\.' || true)"

parallel=(-j "$(hp_nproc)")
hp_info "ctest: $HP_TESTS_DIR"
ctest --test-dir "$HP_TESTS_DIR" --output-on-failure --no-tests=error -LE multihost "${parallel[@]}" ||
    failed+=(ctest)
ctest --test-dir "$HP_TESTS_DIR" --output-on-failure --no-tests=error -L multihost ||
    failed+=(ctest-multihost)

hp_info "ctest under ThreadSanitizer: $tsan_dir/native/tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir "$tsan_dir/native/tests" --output-on-failure --no-tests=error -L unit \
    "${parallel[@]}" || failed+=(ctest-tsan)

hp_info "ctest under AddressSanitizer + UndefinedBehaviorSanitizer: $HP_FUZZ_DIR/native/tests"
env "${hp_sanitizer_env[@]}" ASAN_OPTIONS="detect_leaks=1" \
    ctest --test-dir "$HP_FUZZ_DIR/native/tests" --output-on-failure --no-tests=error \
    -L '^(unit|multirank)$' -E 'mpi' "${parallel[@]}" || failed+=(ctest-asan)
env "${hp_sanitizer_env[@]}" ASAN_OPTIONS="detect_leaks=0" \
    ctest --test-dir "$HP_FUZZ_DIR/native/tests" --output-on-failure --no-tests=error \
    -L '^multirank$' -R 'mpi' "${parallel[@]}" || failed+=(ctest-asan-mpi)

hp_info "fuzzing ($HP_FUZZ_DIR)"
"$HP_REPO_ROOT/scripts/fuzz.sh" --all 12 || failed+=(fuzz)
"$HP_REPO_ROOT/scripts/soak.sh" 500 || failed+=(soak)

hp_info "pytest with $HP_PYTHON"
pytest=(-m pytest -p no:cacheprovider -q)
# One test file per worker, a worker per CPU (pytest-xdist); the multihost tests alone after.
on_each_cpu=(-n "$(hp_nproc)" --dist loadfile)
PYTHONPATH="$HP_REPO_ROOT/python" "$HP_PYTHON" "${pytest[@]}" "${on_each_cpu[@]}" -m "not multihost" \
    "$HP_REPO_ROOT/tests/python" "$HP_REPO_ROOT/tests/build" "$@" || failed+=(pytest)
# (Exit status 5: arguments such as -k selected none of them.)
PYTHONPATH="$HP_REPO_ROOT/python" "$HP_PYTHON" "${pytest[@]}" -m multihost \
    "$HP_REPO_ROOT/tests/python" "$HP_REPO_ROOT/tests/build" "$@" || [[ $? == 5 ]] ||
    failed+=(pytest-multihost)

asan_python_tests=(test_shmem_python.py test_moe_python.py test_runtime_python.py
    test_runtime_node.py test_ops.py test_hp_moe.py test_hprun.py test_rank_death.py
    test_job_trust.py test_topology.py test_cli.py)
hp_info "pytest under AddressSanitizer + UndefinedBehaviorSanitizer: $HP_FUZZ_DIR's payload"
env "${hp_sanitizer_env[@]}" ASAN_OPTIONS="detect_leaks=0" LD_PRELOAD="$(hp_asan_runtime)" \
    HP_BUILD_DIR="$HP_FUZZ_DIR" PYTHONPATH="$HP_REPO_ROOT/python" \
    "$HP_PYTHON" "${pytest[@]}" "${on_each_cpu[@]}" -k "not torch and not example" \
    "${asan_python_tests[@]/#/$HP_REPO_ROOT/tests/python/}" || failed+=(pytest-asan)

left="$(comm -13 <(echo "$shm_before") <(ls /dev/shm | grep '^hp\.' || true))"
if [[ -n "$left" ]]; then
    hp_warn "tests left shared memory behind: $(echo $left)"
    failed+=(shm-leftovers)
fi

if ((${#failed[@]})); then
    hp_die 1 HP-TESTS-FAILED "failed: ${failed[*]}"
fi
hp_info "all tests passed"
