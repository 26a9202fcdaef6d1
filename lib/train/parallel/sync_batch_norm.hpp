// SyncBatchNorm (ddp.sync_batch_norm): batch normalisation whose training-mode statistics are those of the global
// batch over all ranks, with torch.nn.SyncBatchNorm's semantics, as a custom autograd function whose forward and
// backward all-reduce through the Communicator; and the switch that makes a model's BatchNorm layers use it.
#pragma once

#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace mgtrain {

class Communicator;
class Model;
struct DdpConfig;

// A batch-norm layer's tensors and settings, as torch.nn.BatchNorm's attributes. Undefined weight/bias: affine off;
// undefined running_mean/running_var/num_batches_tracked: track_running_stats off. momentum nullopt: cumulative
// moving average (factor 1 / num_batches_tracked), as momentum=None in Python.
struct BatchNormTensors {
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  std::optional<double> momentum = 0.1;
  double eps = 1e-5;
};

// Training-mode normalisation of `input` [N, C, ...] with the mean and biased variance of all ranks' inputs together:
// one all-reduce of the per-channel sum, sum of squares and count (float64), so ranks may hold different N, even 0.
// running_mean/running_var, when defined, move by `momentum` towards the global mean and unbiased variance, computed
// from the same all-reduced sums on every rank, so they stay identical everywhere.
// Backward all-reduces the per-channel sums of dy and dy * (x - mean): the input gradient is that of the sum of all
// ranks' losses (as Python's); weight and bias get this rank's share, summed over ranks by the gradient reducer.
// Collective: every rank calls it for the same layers in the same order, and runs backward likewise.
// Throws UsageError when all ranks together hold at most one value per channel.
at::Tensor sync_batch_norm_training(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                    const at::Tensor& running_mean, const at::Tensor& running_var, double momentum,
                                    double eps, Communicator& comm);

// torch.nn.SyncBatchNorm.forward: counts num_batches_tracked in training mode; synchronises only in training mode
// with a world above 1; otherwise (evaluation, or a world of 1) it is exactly at::batch_norm, without communication.
at::Tensor sync_batch_norm_forward(const at::Tensor& input, BatchNormTensors& layer, bool training, Communicator& comm);

// Makes every layers::BatchNorm2d under `root` (itself included) a SyncBatchNorm over `comm`, keeping its parameters,
// buffers and names (so the optimizer, the reducer, checkpoints and export see the same model). Returns how many
// layers it converted. `comm` must outlive the module's forwards.
int convert_to_sync_batch_norm(torch::nn::Module& root, Communicator& comm);
// Back to per-rank statistics; returns how many layers it reverted.
int revert_sync_batch_norm(torch::nn::Module& root);
// The built-in models' layers (a TorchScript model's are left alone: 0).
int convert_to_sync_batch_norm(Model& model, Communicator& comm);

// The trainer's hook, after the model is built and moved to its device and before the optimizer and the gradient
// reducer: with ddp.sync_batch_norm converts the model and returns the count; rank 0 warns once when there was no
// BatchNorm layer to convert. Without the key: 0, nothing changed.
int apply_sync_batch_norm(const DdpConfig& ddp, Model& model, Communicator& comm);
// For rank 0's start line: ", 3 BatchNorm layers synchronised", or "" for 0.
std::string sync_batch_norm_note(int synchronised);

}  // namespace mgtrain
