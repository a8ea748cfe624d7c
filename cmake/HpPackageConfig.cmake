# The exported CMake package: a C++ user points CMAKE_PREFIX_PATH at
# <payload>/hyper_parallel/core and calls find_package(HyperParallel [COMPONENTS shmem kernels ops]),
# getting HyperParallel::common, ::platform and ::runtime, ::shmem from the symmetric_memory slice,
# ::kernels and ::moe from the multicore slice and ::ops (hp::ops::find) from the custom_ops slice.
include(CMakePackageConfigHelpers)
set(HP_CMAKE_DIR "${HP_LIB_DIR}/cmake/HyperParallel")
install(EXPORT ${HP_EXPORT_SET} NAMESPACE HyperParallel::
  DESTINATION ${HP_CMAKE_DIR} COMPONENT ${HP_COMPONENT})
if(NOT HP_COMPONENT STREQUAL "core")
  return()  # the core's HyperParallelConfig.cmake finds the other slices' targets
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/HyperParallelConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/HyperParallelConfig.cmake"
  INSTALL_DESTINATION ${HP_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/HyperParallelConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/HyperParallelConfig.cmake"
  "${PROJECT_BINARY_DIR}/HyperParallelConfigVersion.cmake"
  DESTINATION ${HP_CMAKE_DIR} COMPONENT ${HP_COMPONENT})
