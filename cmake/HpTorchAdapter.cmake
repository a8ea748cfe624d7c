# What every torch adapter project shares (native/<component>/adapters/torch): the language and
# warning settings, Debian's libtorch, and
#   hp_add_torch_adapter(<target> <output name> <slice> SOURCES ... LIBS ... RUNPATH <runpath>)
# a shared library lib<output name>.so installed in hyper_parallel/<slice>/lib. An adapter is a
# separate project, rebuilt clean by its component script for each Python / torch / toolchain
# identity (scripts/lib/component.sh hp_build_adapter).
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
add_compile_options(-Wall -Wextra -Wno-missing-field-initializers)
# As HpToolchain.cmake: file names relative to the checkout.
get_filename_component(HP_REPO_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
add_compile_options(-fmacro-prefix-map=${HP_REPO_ROOT}/=)
if(HP_WERROR)
  add_compile_options(-Werror)
endif()
find_package(Torch REQUIRED)

function(hp_add_torch_adapter target output slice)
  cmake_parse_arguments(ARG "" "RUNPATH" "SOURCES;LIBS" ${ARGN})
  add_library(${target} SHARED ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${output} INSTALL_RPATH "${ARG_RUNPATH}")
  # Torch's own headers warn with our flags; they are system headers to us.
  get_target_property(torch_includes torch INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(${target} SYSTEM PRIVATE ${torch_includes})
  target_link_libraries(${target} PRIVATE ${TORCH_LIBRARIES} ${ARG_LIBS})
  # Glue over torch's templates: line tables only, as the CPython extensions
  # (hp_glue in HpTargets.cmake).
  target_compile_options(${target} PRIVATE -g1)
  install(TARGETS ${target} LIBRARY DESTINATION hyper_parallel/${slice}/lib)
endfunction()
