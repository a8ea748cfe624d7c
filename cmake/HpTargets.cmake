# hp_add_library(<name> SOURCES ... [PUBLIC_LIBS ...] [PRIVATE_LIBS ...] [HEADERS ...])
#   A shared library libhyper_parallel_<name>.so (private SONAME, no version symlinks: wheels
#   cannot carry symlinks), target hp_<name>, alias HyperParallel::<name>, RUNPATH $ORIGIN.
function(hp_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS;HEADERS" ${ARGN})
  add_library(hp_${name} SHARED ${ARG_SOURCES})
  add_library(HyperParallel::${name} ALIAS hp_${name})
  set_target_properties(hp_${name} PROPERTIES
    OUTPUT_NAME hyper_parallel_${name}
    EXPORT_NAME ${name}
    INSTALL_RPATH "${HP_LIB_RUNPATH}")
  target_include_directories(hp_${name} PUBLIC
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/native>"
    "$<INSTALL_INTERFACE:${HP_INCLUDE_DIR}>"
    # Headers of one slice include another slice's as "<layer>/<file>.h" (e.g. the shmem
    # headers include "common/status.h"): the slices are installed apart.
    "$<INSTALL_INTERFACE:${HP_INCLUDE_DIR}/hyper_parallel>")
  target_compile_definitions(hp_${name} PRIVATE HP_BUILDING_LIBRARY=1)
  target_link_libraries(hp_${name} PUBLIC ${ARG_PUBLIC_LIBS} PRIVATE ${ARG_PRIVATE_LIBS})
  install(TARGETS hp_${name} EXPORT ${HP_EXPORT_SET}
    LIBRARY DESTINATION ${HP_LIB_DIR} COMPONENT ${HP_COMPONENT})
  file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}/native" "${CMAKE_CURRENT_SOURCE_DIR}")
  install(FILES ${ARG_HEADERS} DESTINATION ${HP_INCLUDE_DIR}/hyper_parallel/${rel}
    COMPONENT ${HP_COMPONENT})
endfunction()

# Open MPI as the tests run it (docs/shmem.md, "Open MPI"): as root, with the btl and osc
# components that work on these hosts (libfabric's ofi btl is slow and crashes; osc/rdma breaks
# OSHMEM's finalize).
set(HP_MPIRUN_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  "OMPI_MCA_btl=^openib,ofi" "OMPI_MCA_osc=^rdma" OMPI_MCA_rmaps_base_oversubscribe=1)

# Compile options of every test source (and of the owner of their precompiled header, which
# must match): line tables only (-g1: file:line in every backtrace, a third of the compile
# time of full debug info) and little optimisation (the tests' own code is checks, not hot
# loops; the code under test is the payload's, built as shipped): -O1 with GCC, where it costs
# little over -O0 and keeps the reference loops of the tests quick; -O0 with clang (the
# AddressSanitizer build), where optimising the instrumented test code is half of its compile
# time. HP_TEST_OPTIMIZED_LEVEL is an OPTIMIZED test's (hp_add_test).
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(HP_TEST_LEVEL -O0)
else()
  set(HP_TEST_LEVEL -O1)
endif()
set(HP_TEST_OPTIMIZED_LEVEL -O1)

# hp_test_compile_options(<target> [<level>]): <level> defaults to HP_TEST_LEVEL.
function(hp_test_compile_options target)
  set(level ${HP_TEST_LEVEL})
  if(ARGC GREATER 1)
    set(level ${ARGV1})
  endif()
  # GCC 12 loses the system-header status of libstdc++'s code loaded from a precompiled header
  # and reports its known false bounds warnings in std::string's inlined copies.
  set(false_positives -Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread -Wno-restrict)
  target_compile_options(${target} PRIVATE -g1 ${level}
    "$<$<CXX_COMPILER_ID:GNU>:${false_positives}>")
endfunction()

# The tests' precompiled header, made once per project by an executable that only owns it (an
# executable, so that its -fPIE matches the tests'). GoogleTest, nlohmann-json, fmt and the
# standard library are most of what a test source parses; every test target reuses this one
# header (REUSE_FROM), so its definitions (GoogleTest's and fmt's, which every test links) and
# options are the tests'.
function(hp_test_precompiled_header)
  find_package(fmt REQUIRED)
  find_package(nlohmann_json 3.11 REQUIRED)
  if(TARGET hp_test_pch)
    return()
  endif()
  set(main "${PROJECT_BINARY_DIR}/hp_test_pch_main.cpp")
  file(CONFIGURE OUTPUT "${main}" CONTENT "int main() { return 0; }\n")
  add_executable(hp_test_pch "${main}")
  target_link_libraries(hp_test_pch PRIVATE
    GTest::gtest GTest::gtest_main GTest::gmock fmt::fmt nlohmann_json::nlohmann_json)
  hp_test_compile_options(hp_test_pch)
  set(headers gmock/gmock.h gtest/gtest.h nlohmann/json.hpp fmt/format.h algorithm atomic chrono
    filesystem fstream functional map memory string thread vector)
  list(TRANSFORM headers REPLACE "^(.+)$" "$<$<COMPILE_LANGUAGE:CXX>:<\\1$<ANGLE-R>>")
  target_precompile_headers(hp_test_pch PRIVATE ${headers})
endfunction()

# hp_test_executable(<target> <level> <libs> <source>...): a GoogleTest executable (without a
# main) compiled at <level>, linked with <libs>, installed under tests/<component>/bin.
function(hp_test_executable target level libs)
  find_package(GTest REQUIRED)
  add_executable(${target} ${ARGN})
  target_link_libraries(${target} PRIVATE ${libs} GTest::gtest GTest::gmock)
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/native" "${PROJECT_SOURCE_DIR}/tests")
  hp_test_precompiled_header()
  target_link_libraries(${target} PRIVATE fmt::fmt)
  if(level STREQUAL HP_TEST_LEVEL)  # the shared header's options are HP_TEST_LEVEL's
    target_precompile_headers(${target} REUSE_FROM hp_test_pch)
  endif()
  hp_test_skip_c_sources_pch(${ARGN})
  hp_test_compile_options(${target} ${level})
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "${HP_TEST_RUNPATH}")
  install(TARGETS ${target} RUNTIME DESTINATION ${HP_TEST_DIR}/bin COMPONENT tests)
endfunction()

# The C sources among the arguments do not take the (C++) precompiled header.
function(hp_test_skip_c_sources_pch)
  set(c_sources ${ARGN})
  list(FILTER c_sources INCLUDE REGEX "\\.c$")
  if(c_sources)
    set_source_files_properties(${c_sources} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# hp_test_bundle(<out-var> <level> <libs>): the test bundle of this directory for tests linked
# with <libs> at <level>, made on first use: one executable (tests_<directory under tests/>, a
# _2, _3 ... suffix for the directory's further bundles) whose sources share unity translation
# units, so that GoogleTest's, fmt's and the headers' inline code is compiled once per batch
# rather than once per test source; its main selects a ctest test's sources
# (tests/common/test_main.cpp).
function(hp_test_bundle out level libs)
  string(REPLACE ";" "," key "${level}|${libs}")
  get_property(keys DIRECTORY PROPERTY HP_TEST_BUNDLE_KEYS)  # one per bundle, in order
  list(FIND keys "${key}" index)
  if(index EQUAL -1)
    list(LENGTH keys index)
    set_property(DIRECTORY APPEND PROPERTY HP_TEST_BUNDLE_KEYS "${key}")
  endif()
  file(RELATIVE_PATH dir "${PROJECT_SOURCE_DIR}/tests" "${CMAKE_CURRENT_SOURCE_DIR}")
  string(REPLACE "/" "_" target "tests_${dir}")
  if(index GREATER 0)
    math(EXPR number "${index} + 1")
    string(APPEND target "_${number}")
  endif()
  if(NOT TARGET ${target})
    hp_test_executable(${target} "${level}" "${libs}" "${PROJECT_SOURCE_DIR}/tests/common/test_main.cpp")
  endif()
  set(${out} ${target} PARENT_SCOPE)
endfunction()

# hp_add_test(<name> SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s] [COST s] [OPTIMIZED]
#             [RUNS <ctest name> <launcher args...> ...])
#   The GoogleTest tests of SOURCES, registered in the installed CTestTestfile as ctest test
#   <name> (labels default to "unit"), in an executable installed under tests/<component>/bin:
#   the test bundle of their directory, LIBS and optimisation level (hp_test_bundle), run with
#   --hp_sources=<SOURCES> (tests/common/test_main.cpp); or, when a source defines its own
#   main() or replaces the global operator new, an executable of their own, test_<name>. COST, the
#   run's seconds when it is much longer than the others': ctest -j starts the costliest tests
#   first (a fresh clone has no timings of earlier runs), so that a long test does not end the
#   run alone on one CPU. OPTIMIZED: the test's own loops are most of its running time, so it
#   compiles at HP_TEST_OPTIMIZED_LEVEL in every build (without the shared precompiled header
#   where that is not HP_TEST_LEVEL, the header's; see hp_test_compile_options). Each RUNS entry
#   registers another ctest run of the same executable under a launcher, written as
#   "<ctest name>|<command>|<arg>|..." where <command> is HPRUN (the payload's hprun), MPIRUN
#   (Open MPI's mpirun, with HP_MPIRUN_ENV) or an absolute program; "ENV:NAME=value" parts set
#   the run's environment; the executable (and its --hp_sources) is appended.
function(hp_add_test name)
  cmake_parse_arguments(ARG "OPTIMIZED" "TIMEOUT;COST" "SOURCES;LIBS;LABELS;RUNS;RUNS_LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(level ${HP_TEST_LEVEL})
  if(ARG_OPTIMIZED)
    set(level ${HP_TEST_OPTIMIZED_LEVEL})
  endif()
  set(own_executable FALSE)
  set(names "")
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE)
    file(READ "${path}" text)
    # Its own main(), or a replacement of the global operator new (process-wide, it would
    # change every test of a bundle): an executable of its own.
    if(text MATCHES "(^|\n)int main\\(" OR text MATCHES "(^|\n)[^\n/]*void\\* operator new\\(")
      set(own_executable TRUE)
    endif()
    get_filename_component(base "${source}" NAME)
    list(APPEND names "${base}")
  endforeach()
  if(own_executable)
    string(REPLACE "." "_" exe "test_${name}")
    hp_test_executable(${exe} "${level}" "${ARG_LIBS}" ${ARG_SOURCES})
    target_link_libraries(${exe} PRIVATE GTest::gtest_main)
    set(selection "")
  else()
    hp_test_bundle(exe "${level}" "${ARG_LIBS}")
    target_sources(${exe} PRIVATE ${ARG_SOURCES})
    hp_test_skip_c_sources_pch(${ARG_SOURCES})
    list(JOIN names "," names)
    set(selection " \"--hp_sources=${names}\"")
  endif()
  string(REPLACE ";" "\\;" labels "${ARG_LABELS}")
  set(binary "\"\${CMAKE_CURRENT_LIST_DIR}/bin/${exe}\"${selection}")
  set(cost "")
  if(ARG_COST)
    set(cost " COST ${ARG_COST}")
  endif()
  string(CONCAT entry
    "add_test(${name} ${binary})\n"
    "set_tests_properties(${name} PROPERTIES LABELS \"${labels}\" TIMEOUT ${ARG_TIMEOUT}${cost})\n")
  if(NOT ARG_RUNS_LABELS)
    set(ARG_RUNS_LABELS multirank)
  endif()
  string(REPLACE ";" "\\;" run_labels "${ARG_RUNS_LABELS}")
  foreach(run IN LISTS ARG_RUNS)
    string(REPLACE "|" ";" parts "${run}")
    list(POP_FRONT parts run_name)
    list(POP_FRONT parts command)
    set(env "")
    if(command STREQUAL "HPRUN")
      set(command "\${CMAKE_CURRENT_LIST_DIR}/../../payload/hyper_parallel/symmetric_memory/bin/hprun")
    elseif(command STREQUAL "MPIRUN")
      find_program(HP_MPIRUN mpirun REQUIRED)
      set(command "${HP_MPIRUN}")
      set(env "${HP_MPIRUN_ENV}")
    endif()
    # "ENV:NAME=value" parts set the run's environment instead of being arguments.
    set(args_list "")
    foreach(part IN LISTS parts)
      if(part MATCHES "^ENV:(.*)$")
        list(APPEND env "${CMAKE_MATCH_1}")
      else()
        list(APPEND args_list "${part}")
      endif()
    endforeach()
    list(JOIN args_list " " args)
    string(APPEND entry
      "add_test(${run_name} \"${command}\" ${args} ${binary})\n"
      "set_tests_properties(${run_name} PROPERTIES LABELS \"${run_labels}\" TIMEOUT ${ARG_TIMEOUT}"
      " ENVIRONMENT \"${env}\")\n")
  endforeach()
  set_property(GLOBAL APPEND_STRING PROPERTY HP_INSTALLED_TESTS "${entry}")
endfunction()

# The CTestTestfile.cmake that runs the installed test executables (ctest --test-dir).
function(hp_write_installed_ctest_file)
  get_property(tests GLOBAL PROPERTY HP_INSTALLED_TESTS)
  set(out "${PROJECT_BINARY_DIR}/installed_tests/CTestTestfile.cmake")
  file(GENERATE OUTPUT "${out}" CONTENT
    "# Generated by CMake: the ${HP_COMPONENT} tests, run against the payload.\n${tests}")
  install(FILES "${out}" DESTINATION ${HP_TEST_DIR} COMPONENT tests)
endfunction()

# hp_glue(<target> [SOURCES <file>...])
#   Compile options of glue: the command-line parsing of the executables (CLI11), the CPython
#   extensions (pybind11), the examples and the benchmarks; with SOURCES only those files of the
#   target. Most of their compiled code is those header-only libraries' inline functions. Line
#   tables only (-g1): full debug info of that code costs a quarter of the files' compile time
#   and is not what anyone debugs; backtraces and profiles still name files and lines.
#   Everything else keeps full debug info (split off the payload into build/native/debug).
#   In a sanitizer build also -O0: there the optimiser is most of their compile time, and the
#   code they call is the libraries' (-O1).
function(hp_glue target)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  set(options -g1)
  if(HP_SANITIZE)
    list(APPEND options -O0)
  endif()
  if(ARG_SOURCES)
    set_property(SOURCE ${ARG_SOURCES} TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS ${options})
  else()
    target_compile_options(${target} PRIVATE ${options})
  endif()
endfunction()

# hp_add_executable(<name> SOURCES ... [LIBS ...]): a tool shipped in <slice>/bin.
function(hp_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  set_target_properties(${name} PROPERTIES INSTALL_RPATH "${HP_BIN_RUNPATH}")
  install(TARGETS ${name} RUNTIME DESTINATION ${HP_BIN_DIR} COMPONENT ${HP_COMPONENT})
endfunction()
