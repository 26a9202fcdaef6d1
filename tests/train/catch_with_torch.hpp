// Catch2 for tests that also include LibTorch. Debian's c10 logs through glog, whose CHECK macro collides with
// Catch's: include glog (through c10's logging header) first, drop its CHECK, then Catch. Include this instead of
// <catch2/catch.hpp>, before any torch header.
#pragma once

#include <c10/util/Logging.h>
#undef CHECK
#include <catch2/catch.hpp>
