# LibTorch for mgtrain's train libraries and for projects that link the installed package (lib/package.cmake): one
# macro that finds it, and one function that gives a target what compiling and linking against it needs. Included by
# third_party/dependencies.cmake in the build and by the installed mgtrainConfig.cmake (a copy beside it) in a
# consumer, so both find the same LibTorch the same way.

# mgtrain_find_torch(): find_package(Torch) and the facts around it, as variables of the caller's scope:
#   MGTRAIN_TORCH_ROOT (in)   a pip wheel's torch directory, or empty for a LibTorch find_package finds by itself
#   Torch_VERSION, Torch_DIR, TORCH_LIBRARIES, TORCH_CXX_FLAGS    as TorchConfig sets them
#   MGTRAIN_WITH_CUDA         ON when torch_cuda has c10d's NCCL process group
#   MGTRAIN_NCCL_INCLUDE_DIR  the wheel's NCCL headers (a pip torch with CUDA), else empty
#   MGTRAIN_FMT_OVERRIDE_DIR  <binary dir>/fmt-before-torch (a pip torch bundling fmt), else empty
#   GLOO_INCLUDE_DIR          gloo's headers (ProcessGroupGloo.hpp needs them)
# fmt::fmt must be found first (its headers are what fmt-before-torch points at).
macro(mgtrain_find_torch)
  set(MGTRAIN_NCCL_INCLUDE_DIR "")
  set(MGTRAIN_FMT_OVERRIDE_DIR "")
  # MGTRAIN_TORCH_ROOT: the torch package directory of a pip wheel (<venv>/lib/pythonX.Y/site-packages/torch), set by
  # scripts/build-torch2.sh. Then every LibTorch library must come from there, never from Debian's libtorch-dev
  # (TorchConfig's find_library(c10 PATHS <root>/lib) searches /usr/lib first and would link Debian's libc10 1.13).
  if(MGTRAIN_TORCH_ROOT)
    get_filename_component(MGTRAIN_TORCH_ROOT "${MGTRAIN_TORCH_ROOT}" REALPATH)
    get_filename_component(_mgtrain_site "${MGTRAIN_TORCH_ROOT}/.." REALPATH)
    # The CUDA runtime and NVRTC that torch was built with ship as wheels beside it (nvidia/cu13/lib); link those
    # rather than the toolkit's (/usr/local/cuda), so that one libcudart.so.13 is loaded, the one torch expects.
    file(GLOB _mgtrain_cudart "${_mgtrain_site}/nvidia/cu*/lib/libcudart.so.*")
    file(GLOB _mgtrain_nvrtc "${_mgtrain_site}/nvidia/cu*/lib/libnvrtc.so.*")
    list(FILTER _mgtrain_nvrtc EXCLUDE REGEX "builtins")
    if(_mgtrain_cudart AND NOT CUDA_cudart_LIBRARY)
      list(GET _mgtrain_cudart 0 _first)
      set(CUDA_cudart_LIBRARY "${_first}" CACHE FILEPATH "CUDA runtime of the torch wheel")
    endif()
    if(_mgtrain_nvrtc AND NOT CUDA_NVRTC_LIB)
      list(GET _mgtrain_nvrtc 0 _first)
      set(CUDA_NVRTC_LIB "${_first}" CACHE FILEPATH "NVRTC of the torch wheel")
    endif()
    # Hide the system library directories while TorchConfig/Caffe2Config search (CUDA stays: /usr/local/cuda).
    set(_mgtrain_saved_ignore "${CMAKE_IGNORE_PATH}")
    list(APPEND CMAKE_IGNORE_PATH /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE} /usr/lib /lib/${CMAKE_LIBRARY_ARCHITECTURE} /lib
         /usr/lib64 /lib64)
    # TorchConfig's find_dependency(Caffe2 PATHS ...) would also find Debian's Caffe2Config first: name it.
    set(Caffe2_DIR "${MGTRAIN_TORCH_ROOT}/share/cmake/Caffe2" CACHE PATH "Caffe2 of MGTRAIN_TORCH_ROOT" FORCE)
    find_package(Torch REQUIRED PATHS "${MGTRAIN_TORCH_ROOT}/share/cmake" NO_DEFAULT_PATH)
    set(CMAKE_IGNORE_PATH "${_mgtrain_saved_ignore}")
    foreach(_var TORCH_LIBRARY c10_LIBRARY C10_CUDA_LIBRARY)
      if(DEFINED ${_var} AND NOT "${${_var}}" MATCHES "^${MGTRAIN_TORCH_ROOT}/")
        message(FATAL_ERROR "mgtrain: ${_var} is ${${_var}}, not under MGTRAIN_TORCH_ROOT ${MGTRAIN_TORCH_ROOT}: "
                            "this build would mix two LibTorch versions (start from an empty build directory)")
      endif()
    endforeach()
    foreach(_target torch torch_cpu c10 torch_cuda c10_cuda)
      if(TARGET ${_target})
        get_target_property(_loc ${_target} IMPORTED_LOCATION_RELEASE)
        if(_loc AND NOT _loc MATCHES "^${MGTRAIN_TORCH_ROOT}/")
          message(FATAL_ERROR "mgtrain: ${_target} is ${_loc}, not under MGTRAIN_TORCH_ROOT ${MGTRAIN_TORCH_ROOT}")
        endif()
      endif()
    endforeach()
    # The wheel's NCCL headers: NCCLUtils.hpp picks features (and so ProcessGroupNCCL's layout) by NCCL_VERSION_CODE,
    # which must be the NCCL torch was built with, not the toolkit's.
    if(EXISTS "${_mgtrain_site}/nvidia/nccl/include/nccl.h")
      set(MGTRAIN_NCCL_INCLUDE_DIR "${_mgtrain_site}/nvidia/nccl/include")
    endif()
    # The wheel bundles fmt (a newer major) in <root>/include/fmt. mgtrain links Debian's libfmt, so its headers
    # must win, for mgtrain's code and torch's alike: an -I directory holding only a link to /usr/include/fmt
    # (-I is searched before the -isystem torch include directory; /usr/include itself cannot be put first).
    if(EXISTS "${MGTRAIN_TORCH_ROOT}/include/fmt")
      set(MGTRAIN_FMT_OVERRIDE_DIR "${CMAKE_BINARY_DIR}/fmt-before-torch")
      file(MAKE_DIRECTORY "${MGTRAIN_FMT_OVERRIDE_DIR}")
      get_target_property(_fmt_dirs fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
      find_path(_mgtrain_fmt_root fmt/core.h HINTS ${_fmt_dirs} NO_CACHE)
      file(CREATE_LINK "${_mgtrain_fmt_root}/fmt" "${MGTRAIN_FMT_OVERRIDE_DIR}/fmt" SYMBOLIC)
    endif()
  else()
    find_package(Torch REQUIRED)
  endif()
  # The NCCL path needs c10d's ProcessGroupNCCL, which a CUDA LibTorch built with NCCL announces with the compile
  # definition USE_C10D_NCCL on torch_cuda (2.x; Debian's 1.13 is CPU-only). A torch_cuda without it has no NCCL.
  set(MGTRAIN_WITH_CUDA OFF)
  set(_mgtrain_cuda_why "no torch_cuda")
  if(TARGET torch_cuda)
    get_target_property(_cuda_defs torch_cuda INTERFACE_COMPILE_DEFINITIONS)
    find_file(_mgtrain_pg_nccl torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH
              NO_CACHE)
    if(NOT "USE_C10D_NCCL" IN_LIST _cuda_defs)
      set(_mgtrain_cuda_why "torch_cuda without USE_C10D_NCCL (LibTorch built without NCCL)")
    elseif(NOT _mgtrain_pg_nccl)
      set(_mgtrain_cuda_why "no ProcessGroupNCCL.hpp in ${TORCH_INCLUDE_DIRS}")
    else()
      set(MGTRAIN_WITH_CUDA ON)
    endif()
  endif()
  if(MGTRAIN_WITH_CUDA)
    message(STATUS "mgtrain: LibTorch ${Torch_VERSION} with CUDA: building the NCCL path")
  else()
    message(STATUS "mgtrain: LibTorch ${Torch_VERSION} without CUDA (${_mgtrain_cuda_why}): CPU-only build (gloo backend)")
  endif()
  # ProcessGroupGloo.hpp needs gloo's headers. The 2.x wheels ship none (LibTorch zips may: build-cuda.sh passes
  # GLOO_INCLUDE_DIR then); Debian's libgloo-dev works: ProcessGroupGloo's layout holds gloo types only behind
  # pointers, and the newer Store API is behind GLOO_STORE_HAS_STORE_V2, which Debian's config.h does not define.
  find_path(GLOO_INCLUDE_DIR gloo/config.h)
  if(NOT GLOO_INCLUDE_DIR)
    message(FATAL_ERROR "gloo headers not found: ProcessGroupGloo.hpp needs them (Debian: apt-get install libgloo-dev)")
  endif()
  set(GLOO_INCLUDE_DIR ${GLOO_INCLUDE_DIR})
  set(Torch_VERSION ${Torch_VERSION})
endmacro()

# mgtrain_torch_usage(TARGET PUBLIC|INTERFACE): TARGET compiles and links against the LibTorch mgtrain_find_torch
# found: the include directories (fmt-before-torch first, the wheel's NCCL, gloo), TORCH_CXX_FLAGS, MGTRAIN_WITH_CUDA
# and TORCH_LIBRARIES. PUBLIC is the build's mgtrain_train_torch: everything only as $<BUILD_INTERFACE:...>, since
# these are this machine's paths found at configure time, which the installed package finds again in the consumer
# (INTERFACE, on the imported mgtrain::train_torch).
function(mgtrain_torch_usage target scope)
  set(fmt_dir ${MGTRAIN_FMT_OVERRIDE_DIR})
  set(nccl_dir ${MGTRAIN_NCCL_INCLUDE_DIR})
  set(gloo_dir ${GLOO_INCLUDE_DIR})
  set(flags ${TORCH_CXX_FLAGS})
  set(libraries ${TORCH_LIBRARIES})
  set(definitions "")
  if(MGTRAIN_WITH_CUDA)
    set(definitions MGTRAIN_WITH_CUDA=1)
  endif()
  if(scope STREQUAL "PUBLIC")
    foreach(list fmt_dir nccl_dir gloo_dir flags libraries definitions)
      list(TRANSFORM ${list} PREPEND "$<BUILD_INTERFACE:")
      list(TRANSFORM ${list} APPEND ">")
    endforeach()
  elseif(NOT scope STREQUAL "INTERFACE")
    message(FATAL_ERROR "mgtrain_torch_usage(${target} ${scope}): expected PUBLIC or INTERFACE")
  endif()
  # Debian's fmt headers before the wheel's bundled fmt; the wheel's NCCL headers before the toolkit's. In the build
  # fmt-before-torch is an -I directory; a consumer sees every directory of an imported target as -isystem, in link
  # order, so there it comes before torch's own (mgtrain::train_torch, then the torch it links).
  if(fmt_dir)
    target_include_directories(${target} BEFORE ${scope} ${fmt_dir})
  endif()
  if(nccl_dir)
    target_include_directories(${target} SYSTEM BEFORE ${scope} ${nccl_dir})
  endif()
  if(gloo_dir)
    target_include_directories(${target} SYSTEM ${scope} ${gloo_dir})
  endif()
  if(flags)
    target_compile_options(${target} ${scope} ${flags})
  endif()
  if(definitions)
    target_compile_definitions(${target} ${scope} ${definitions})
  endif()
  target_link_libraries(${target} ${scope} ${libraries})
  # libstdc++ first among the libraries a binary needs, before LibTorch: some LibTorch builds (PyPI's torch 2.11)
  # export a copy of std::filesystem from libtorch.so and libtorch_cpu.so, and a binary that lists them first binds
  # its std::filesystem calls to that copy, whose remove_all() of a non-empty folder jumps to address 0 (seen on an
  # H200 with torch 2.11: docs/gpu.md). The option comes before the objects on the link line, so the linker records
  # libstdc++.so.6 as the first NEEDED entry and the dynamic linker finds libstdc++'s own definitions first.
  target_link_options(${target} ${scope} "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")
endfunction()
