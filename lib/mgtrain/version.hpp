// The version of mgtrain's public C++ API (the headers of include/mgtrain/ in an installed package, lib/mgtrain/ in
// the tree). The major number changes when a change can break a user's code that compiled before; the minor number
// when something is added. find_package(mgtrain 1) accepts any 1.x (SameMajorVersion). ARCHITECTURE.md says what is
// public and what may change.
#pragma once

#define MGTRAIN_API_VERSION_MAJOR 1
#define MGTRAIN_API_VERSION_MINOR 0
