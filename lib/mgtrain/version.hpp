// The version of mgtrain's public C++ API (the headers of include/mgtrain/ in an installed package, lib/mgtrain/ in
// the tree): mgtrain's version's major and minor number, which the package's mgtrainConfigVersion.cmake carries too.
// Before 1.0 a minor release may change the API (ARCHITECTURE.md#public-api says what is public); from 1.0 on, the
// major number changes when a change can break code that compiled before (find_package(mgtrain 1): SameMajorVersion).
#pragma once

#define MGTRAIN_API_VERSION_MAJOR 0
#define MGTRAIN_API_VERSION_MINOR 1
