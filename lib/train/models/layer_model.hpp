// The Model of the built-in architectures: a ModuleModel (module_model.hpp) over a tree of layers (layers.hpp)
// whose root computes the logits; its module() is the tree the TorchScript exporter and SyncBatchNorm walk.
#pragma once

#include "train/models/layers.hpp"
#include "train/models/module_model.hpp"

namespace mgtrain {

using LayerModel = ModuleModel<layers::Layer>;

}  // namespace mgtrain
