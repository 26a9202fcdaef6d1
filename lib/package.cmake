# The installed CMake package of the worker side (issue 25): `cmake --install` puts the static libraries that
# mgtrain::trainer links, their headers and mgtrainConfig.cmake under the prefix, and a project outside the tree does
#   find_package(mgtrain CONFIG REQUIRED)   # CMAKE_PREFIX_PATH: the install prefix
#   target_link_libraries(my-worker PRIVATE mgtrain::trainer)
# getting every include root, LibTorch and the other dependencies through that one target. Included by
# lib/CMakeLists.txt when MGTRAIN_BUILD_WORKER is on (the package is the LibTorch side).
#
# <prefix>/lib/libmgtrain_*.a                     the libraries (exported as mgtrain::util, mgtrain::train_loop, ...)
# <prefix>/include/mgtrain/internal/<folder>/     their headers, included as "<folder>/name.hpp" as in the tree
# <prefix>/lib/cmake/mgtrain/                     mgtrainConfig.cmake (lib/mgtrainConfig.cmake.in), its version file,
#                                                 mgtrainTargets*.cmake and mgtrain_torch.cmake (finds LibTorch again)
#
# What is packaged is the link closure of mgtrain_trainer among our own targets: linking one more library of ours
# to it (target_link_libraries(mgtrain_trainer INTERFACE mgtrain_api)) packages that one too, headers included.
# Launcher-only libraries (supervise, launch, multinode, ...) are outside the closure and stay out.
include(CMakePackageConfigHelpers)

add_library(mgtrain_trainer INTERFACE)
set_target_properties(mgtrain_trainer PROPERTIES EXPORT_NAME trainer)
target_link_libraries(mgtrain_trainer INTERFACE mgtrain_api)  # the public API and, through it, the trainer
add_library(mgtrain::trainer ALIAS mgtrain_trainer)  # the same name inside the tree

# mgtrain_package_closure(OUT TARGET...): TARGET and every target of this project it links, transitively (imported
# targets and plain library names, which the consumer's find_dependency calls provide, are not ours).
function(mgtrain_package_closure out)
  set(todo ${ARGN})
  set(closure "")
  while(todo)
    list(POP_FRONT todo target)
    if(NOT TARGET "${target}" OR target IN_LIST closure)
      continue()
    endif()
    get_target_property(imported ${target} IMPORTED)
    if(imported)
      continue()
    endif()
    list(APPEND closure ${target})
    get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
    if(links)
      list(APPEND todo ${links})
    endif()
  endwhile()
  set(${out} ${closure} PARENT_SCOPE)
endfunction()

set(MGTRAIN_PACKAGE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mgtrain)
mgtrain_package_closure(MGTRAIN_PACKAGE_TARGETS mgtrain_trainer)
foreach(target ${MGTRAIN_PACKAGE_TARGETS})
  get_target_property(folder ${target} MGTRAIN_FOLDER)
  if(NOT folder)
    continue()  # not an mgtrain_library (mgtrain_trainer itself): no headers of its own
  endif()
  # mgtrain_train_loop -> mgtrain::train_loop; the headers of lib/<folder> and the generated ones of its binary dir.
  string(REGEX REPLACE "^mgtrain_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  get_target_property(include_root ${target} MGTRAIN_INSTALL_INCLUDE_ROOT)
  get_target_property(binary_dir ${target} BINARY_DIR)
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/lib/${folder}/*.hpp ${binary_dir}/generated/${folder}/*.hpp)
  install(FILES ${headers} DESTINATION ${include_root}/${folder} COMPONENT trainer)
endforeach()
install(TARGETS ${MGTRAIN_PACKAGE_TARGETS} EXPORT mgtrainTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT trainer)
install(EXPORT mgtrainTargets NAMESPACE mgtrain:: DESTINATION ${MGTRAIN_PACKAGE_CMAKE_DIR} COMPONENT trainer)

# What the consumer must find again, recorded at configure time: the same LibTorch (its directory and version), the
# CUDA toolkit its CMake files compile against, gloo's headers.
set(MGTRAIN_PACKAGE_TORCH_ROOT "${MGTRAIN_TORCH_ROOT}")
set(MGTRAIN_PACKAGE_CUDA_ROOT "${CUDAToolkit_ROOT}")
set(MGTRAIN_PACKAGE_CUDA_ARCH_LIST "${TORCH_CUDA_ARCH_LIST}")
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/mgtrainConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/package/mgtrainConfig.cmake
                              INSTALL_DESTINATION ${MGTRAIN_PACKAGE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/package/mgtrainConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/package/mgtrainConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/package/mgtrainConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/third_party/mgtrain_torch.cmake
        DESTINATION ${MGTRAIN_PACKAGE_CMAKE_DIR} COMPONENT trainer)
