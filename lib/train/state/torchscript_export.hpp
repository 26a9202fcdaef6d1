// `mgtrain-worker --export-torchscript CHECKPOINT OUT [--force]` (what `mgtrain export --format torchscript` runs):
// the model of a training checkpoint as a TorchScript module for Python's torch.jit.load.
//
// The model is rebuilt from the checkpoint's own "mgtrain.config" metadata, its weights are copied from the
// "model/<name>" tensors, and a torch::jit::Module is assembled that mirrors it:
//  - mlp, cnn, resnet, gpt: one TorchScript submodule per layer of the C++ layer tree (layers.hpp), named as in
//    that tree, so parameter and buffer names are the model's own: "features.0.weight" is the parameter `weight`
//    of submodule `0` of submodule `features` (TorchScript attribute names cannot contain '.'; the dots are the
//    submodule path, exactly like a scripted Python nn.Module). module.state_dict() in Python therefore has the
//    same keys as `mgtrain export --format safetensors` writes. Parameterless layers (ReLU, Flatten, MaxPool2d,
//    Dropout) are submodules too, numbered like Python's nn.Sequential. Each submodule's forward is TorchScript
//    source mirroring the C++ forward op for op (BatchNorm, Dropout and the training/eval switch included).
//  - torchscript: the user's module is loaded again from model.path and gets the checkpoint's weights.
// The model's input shape is not stored in a checkpoint: it comes from the model summary ("cnn on 1x28x28: ...") or
// the data: section, and the weights' shapes are then checked against the rebuilt model, tensor by tensor.
// The module is saved in eval mode, with an extra file "mgtrain.json" ({"model", "step", "source"}). Before the
// file is written the saved bytes are loaded back and their forward is compared with the C++ model's on a fixed
// random input of two samples (an Error if they differ). The file is written atomically (util/atomic_file.hpp); an
// existing OUT is an error without `force`.
#pragma once

#include <string>
#include <vector>

namespace mgtrain {

struct TorchScriptExportResult {
  std::string model;  // the model's summary line
  std::string
      check;  // what was checked: "forward matches the model on a [2, 1, 28, 28] input (max |diff| 0)", or for a
              // torchscript model whose input shape is unknown "the 6 reloaded parameters equal the checkpoint's"
};

// Throws UsageError (exit 2) for a missing or damaged checkpoint, one that is not a training checkpoint, an
// unsupported model, an existing `out_path` without `force`; Error when the exported forward does not reproduce
// the model's.
TorchScriptExportResult export_torchscript(const std::string& checkpoint_path, const std::string& out_path, bool force);

// The worker's `--export-torchscript` entry: args are what follows the flag. Prints one line; returns the exit code.
int run_torchscript_export(const std::vector<std::string>& args);

}  // namespace mgtrain
