# The clang builds (sourced after lib/common.sh): scripts/build_fuzzers.sh's (ASan + UBSan +
# libFuzzer) and scripts/run_tests.sh's ThreadSanitizer one, and the runtime options of every
# run from the first: its ASan ctests and pytest (scripts/run_tests.sh), the fuzz targets
# (scripts/fuzz.sh) and the soak (scripts/soak.sh).
HP_FUZZ_DIR="$HP_BUILD_DIR/fuzz"
HP_CLANG_CC=clang-16 HP_CLANG_CXX=clang++-16
# For `env`/`export`, a component script's compilers in a clang build (clang 16 and its runtimes:
# deps/fuzz-packages.lock). Warnings are the regular (GCC) build's to enforce: clang's set
# differs (C-linkage kernel entries returning hp::Status, for one), and these builds exist to run
# tests under a sanitizer.
hp_clang_build_env=(CXX="$HP_CLANG_CXX" CC="$HP_CLANG_CC" HP_WERROR=0)
# clang's shared ASan runtime, which that build links: a Python interpreter preloads it
# (LD_PRELOAD) to load the build's CPython extensions.
hp_asan_runtime() { "$HP_CLANG_CC" -print-file-name=libclang_rt.asan-x86_64.so; }
# For `env`: UBSan stops at its first report, with a stack; LeakSanitizer suppresses only Open
# MPI's libraries; reports are symbolized by clang 16's symbolizer (deps/fuzz-packages.lock).
# ASAN_OPTIONS (whether leaks are checked) is each run's own.
hp_sanitizer_env=(
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    LSAN_OPTIONS="suppressions=$HP_REPO_ROOT/tests/sanitizers/lsan.supp"
    ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer
)
