# Language level, warnings, sanitizers and the payload's install layout.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "" FORCE)
endif()
# Unity builds: each target compiles its sources in batches of up to 8 per translation unit, so
# that the headers' templates (nlohmann-json's above all) are parsed, instantiated, optimised
# and instrumented once per batch instead of once per file. Each source must then compile
# beside the others of its batch: file-local names differ between the files of a target, and
# no type of an anonymous namespace is a member of a type with linkage.
if(NOT DEFINED CMAKE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
endif()

# GCC 12 warns on designated initializers that omit members with default initializers.
add_compile_options(-Wall -Wextra -Wno-missing-field-initializers)
# Calls between a library's own exported functions bind inside it (direct calls, inlining), not
# through its PLT: nothing interposes single symbols of these libraries.
add_compile_options(-fno-semantic-interposition)
# __FILE__ and std::source_location name files relative to the checkout, so that no shipped
# file carries the build machine's path (the debug info, split out of the shipped files by
# scripts/split_debug.py, keeps absolute paths for gdb).
add_compile_options(-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=)
if(HP_WERROR)
  add_compile_options(-Werror)
endif()

if(HP_SANITIZE)
  # address and undefined combine (ASan with its LeakSanitizer, and UBSan); thread stands alone.
  if(NOT HP_SANITIZE MATCHES "^(address|undefined|address,undefined|thread)$")
    message(FATAL_ERROR
      "HP_SANITIZE=${HP_SANITIZE}: expected address, undefined, address,undefined or thread")
  endif()
  add_compile_options(-fsanitize=${HP_SANITIZE} -fno-omit-frame-pointer)
  # -O1: what the sanitizers are tuned for, and a quicker build than -O2. Line tables only
  # (-g1): a sanitizer report names functions, files and lines from them, and full debug info
  # would be a third of these builds' compile time.
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
  set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
  add_link_options(-fsanitize=${HP_SANITIZE})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # Clang's shared sanitizer runtime, not the static one in each executable: a Python
    # interpreter that preloads it and the programs it starts (hprun, the PEs, which inherit the
    # preload) then share one runtime, which ASan requires.
    add_link_options(-shared-libsan)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-runtime-dir
                    OUTPUT_VARIABLE HP_SANITIZER_RUNTIME_DIR OUTPUT_STRIP_TRAILING_WHITESPACE
                    COMMAND_ERROR_IS_FATAL ANY)
  endif()
  if(HP_SANITIZE MATCHES "undefined")
    # Any undefined behaviour ends the program (a test fails), not a line in its output.
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

# Fuzz builds (scripts/build_fuzzers.sh): clang's libFuzzer on top of ASan + UBSan; the
# libraries carry libFuzzer's coverage instrumentation, only the fuzz targets link its main.
if(HP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT HP_SANITIZE STREQUAL "address,undefined")
    message(FATAL_ERROR "HP_FUZZ needs clang (CXX=clang++-16) and HP_SANITIZE=address,undefined: "
                        "build with scripts/build_fuzzers.sh")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
# Shared libraries resolve every symbol at link time.
set(HP_LINK_NO_UNDEFINED "-Wl,--no-undefined")

# RUNPATHs are set explicitly per target (all relative, $ORIGIN-based); never the build tree's.
set(CMAKE_SKIP_BUILD_RPATH OFF)
set(CMAKE_BUILD_WITH_INSTALL_RPATH OFF)
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH OFF)

# Install layout, relative to CMAKE_INSTALL_PREFIX (= build/native/<component>/install):
#   hyper_parallel/<component>/{lib,include,python,bin}   the payload slice
#   tests/<component>/{bin,CTestTestfile.cmake}          test executables (never shipped)
set(HP_SLICE_DIR "hyper_parallel/${HP_COMPONENT}")
set(HP_LIB_DIR "${HP_SLICE_DIR}/lib")
set(HP_INCLUDE_DIR "${HP_SLICE_DIR}/include")
set(HP_PYTHON_DIR "${HP_SLICE_DIR}/python")
set(HP_TEST_DIR "tests/${HP_COMPONENT}")
# RUNPATHs, all relative: a library finds its own slice's libraries and the core's; an
# executable in <slice>/bin finds both; a test executable in build/native/tests/<c>/bin finds
# them in the merged payload (tested == shipped).
if(HP_COMPONENT STREQUAL "core")
  set(HP_LIB_RUNPATH "$ORIGIN")
  set(HP_TEST_RUNPATH "$ORIGIN/../../../payload/hyper_parallel/core/lib")
elseif(HP_COMPONENT STREQUAL "multicore")
  # multicore (native/moe) also links symmetric_memory's slice.
  set(HP_LIB_RUNPATH "$ORIGIN:$ORIGIN/../../core/lib:$ORIGIN/../../symmetric_memory/lib")
  set(HP_TEST_RUNPATH
    "$ORIGIN/../../../payload/hyper_parallel/core/lib:$ORIGIN/../../../payload/hyper_parallel/${HP_COMPONENT}/lib:$ORIGIN/../../../payload/hyper_parallel/symmetric_memory/lib")
elseif(HP_COMPONENT STREQUAL "custom_ops")
  # custom_ops (native/ops) links the MoE layer (multicore) and symmetric memory.
  set(HP_LIB_RUNPATH "$ORIGIN:$ORIGIN/../../core/lib:$ORIGIN/../../symmetric_memory/lib:$ORIGIN/../../multicore/lib")
  set(HP_TEST_RUNPATH
    "$ORIGIN/../../../payload/hyper_parallel/core/lib:$ORIGIN/../../../payload/hyper_parallel/${HP_COMPONENT}/lib:$ORIGIN/../../../payload/hyper_parallel/symmetric_memory/lib:$ORIGIN/../../../payload/hyper_parallel/multicore/lib")
else()
  set(HP_LIB_RUNPATH "$ORIGIN:$ORIGIN/../../core/lib")
  set(HP_TEST_RUNPATH
    "$ORIGIN/../../../payload/hyper_parallel/core/lib:$ORIGIN/../../../payload/hyper_parallel/${HP_COMPONENT}/lib")
endif()
if(HP_COMPONENT STREQUAL "multicore")
  set(HP_BIN_RUNPATH "$ORIGIN/../lib:$ORIGIN/../../core/lib:$ORIGIN/../../symmetric_memory/lib")
elseif(HP_COMPONENT STREQUAL "custom_ops")
  set(HP_BIN_RUNPATH "$ORIGIN/../lib:$ORIGIN/../../core/lib:$ORIGIN/../../symmetric_memory/lib:$ORIGIN/../../multicore/lib")
else()
  set(HP_BIN_RUNPATH "$ORIGIN/../lib:$ORIGIN/../../core/lib")
endif()
if(HP_SANITIZER_RUNTIME_DIR)
  # Clang's runtime directory is not on the loader's path.
  foreach(runpath HP_LIB_RUNPATH HP_TEST_RUNPATH HP_BIN_RUNPATH)
    string(APPEND ${runpath} ":${HP_SANITIZER_RUNTIME_DIR}")
  endforeach()
endif()
set(HP_BIN_DIR "${HP_SLICE_DIR}/bin")
# The exported CMake targets of this component (HyperParallel::<name>).
if(HP_COMPONENT STREQUAL "core")
  set(HP_EXPORT_SET HyperParallelTargets)
else()
  string(REPLACE "_" ";" words "${HP_COMPONENT}")
  set(HP_EXPORT_SET HyperParallel)
  foreach(w IN LISTS words)
    string(SUBSTRING "${w}" 0 1 first)
    string(TOUPPER "${first}" first)
    string(SUBSTRING "${w}" 1 -1 rest)
    string(APPEND HP_EXPORT_SET "${first}${rest}")
  endforeach()
  string(APPEND HP_EXPORT_SET "Targets")
endif()
