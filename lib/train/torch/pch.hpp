// Precompiled header of mgtrain_train: the narrow LibTorch headers most of the library uses.
// Headers of this library include what they need themselves; this file only speeds up the build.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>
