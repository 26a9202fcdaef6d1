# Dependency glue: every third-party library comes from the system (Debian packages); nothing is vendored.
find_package(fmt REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
# cpp-httplib for the launcher's status API (Debian's libcpp-httplib-dev: the header plus a compiled
# libcpp-httplib.so; its pkg-config flags carry the defines the library was built with, which must match).
find_package(PkgConfig REQUIRED)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# libsodium (Debian's libsodium-dev): HMAC-SHA256 and random nonces for the authenticated rendezvous.
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)

if(MGTRAIN_BUILD_WORKER)
  # LibTorch and what compiling against it needs (a macro shared with the installed package's mgtrainConfig.cmake).
  include(${CMAKE_CURRENT_LIST_DIR}/mgtrain_torch.cmake)
  mgtrain_find_torch()
endif()

# cairo (Debian: libcairo2-dev) draws `mgtrain plot`'s images in the separate mgtrain-plot binary; without it the
# rest builds and `mgtrain plot` says what to install.
option(MGTRAIN_BUILD_PLOT "Build mgtrain-plot when cairo is found" ON)
find_package(PkgConfig QUIET)
if(MGTRAIN_BUILD_PLOT AND PKG_CONFIG_FOUND)
  pkg_check_modules(CAIRO QUIET IMPORTED_TARGET cairo)
endif()
if(MGTRAIN_BUILD_PLOT AND CAIRO_FOUND)
  set(MGTRAIN_WITH_CAIRO ON)
  message(STATUS "mgtrain: cairo ${CAIRO_VERSION}: building mgtrain-plot")
elseif(NOT MGTRAIN_BUILD_PLOT)
  set(MGTRAIN_WITH_CAIRO OFF)
  message(STATUS "mgtrain: MGTRAIN_BUILD_PLOT=OFF: mgtrain-plot is not built")
else()
  set(MGTRAIN_WITH_CAIRO OFF)
  message(STATUS "mgtrain: cairo not found: mgtrain-plot is not built (apt-get install libcairo2-dev)")
endif()

if(MGTRAIN_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
  set(CATCH2_CMAKE_DIR ${Catch2_DIR})
endif()
