// The per-architecture model builders behind build_model (model.hpp); each lives in its own source file.
#pragma once

#include <memory>

#include "train/models/model.hpp"

namespace mgtrain {

std::unique_ptr<Model> build_mlp_model(const ModelConfig& config, const ModelInput& input);     // mlp_model.cpp
std::unique_ptr<Model> build_cnn_model(const ModelConfig& config, const ModelInput& input);     // cnn_model.cpp
std::unique_ptr<Model> build_resnet_model(const ModelConfig& config, const ModelInput& input);  // resnet_model.cpp
std::unique_ptr<Model> build_gpt_model(const ModelConfig& config, const ModelInput& input);     // gpt_model.cpp
std::unique_ptr<Model> build_torchscript_model(const ModelConfig& config,
                                               const ModelInput& input);  // torchscript_model.cpp

}  // namespace mgtrain
