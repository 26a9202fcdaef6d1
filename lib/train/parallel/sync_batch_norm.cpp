// SyncBatchNorm's autograd function, its module-level forward and the model conversion (see sync_batch_norm.hpp).
#include "train/parallel/sync_batch_norm.hpp"

#include <cstdint>
#include <cstdio>
#include <vector>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/module.h>

#include "config/config.hpp"
#include "train/models/layer_model.hpp"
#include "train/models/layers.hpp"
#include "train/parallel/communicator.hpp"
#include "train/torch/torch_compat.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace mgtrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Every dimension but the channels (1): the ones batch norm reduces over.
std::vector<int64_t> reduced_dims(const at::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// [C] → [1, C, 1, ...] to broadcast against the input.
at::Tensor per_channel(const at::Tensor& values, const at::Tensor& input) {
  std::vector<int64_t> shape(static_cast<std::size_t>(input.dim()), 1);
  shape[1] = values.size(0);
  return values.reshape(shape);
}

// What the forward needs besides the tensors autograd tracks.
struct ForwardSettings {
  at::Tensor running_mean, running_var;  // undefined: not tracked
  double momentum, eps;
  Communicator* comm;
};

// Python's torch.nn.modules._functions.SyncBatchNorm, with sums instead of per-rank means and inverse deviations
// (one all-reduce instead of an all-gather): forward all-reduces [sum x | sum x^2 | count], backward
// [sum dy | sum dy * (x - mean)]. Weight and bias are optional arguments, so that absent ones are no autograd
// inputs; backward finds theirs by edge index. The communicator travels as an integer in saved_data (an IValue
// holds no pointer).
struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const torch_compat::optional<at::Tensor>& weight_arg,
                            const torch_compat::optional<at::Tensor>& bias_arg, const ForwardSettings* settings) {
    const at::Tensor weight = weight_arg.value_or(at::Tensor()), bias = bias_arg.value_or(at::Tensor());
    const at::Tensor &running_mean = settings->running_mean, &running_var = settings->running_var;
    const double momentum = settings->momentum, eps = settings->eps;
    Communicator* comm = settings->comm;
    if (input.dim() < 2) {
      throw UsageError(fmt::format("SyncBatchNorm: the input has shape [{}]; it needs [batch, channels, ...]",
                                   fmt::join(input.sizes(), ", ")));
    }
    // Half and bfloat16 inputs (autocast) are normalised in float32, as at::batch_norm accumulates them.
    const bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
    const at::Tensor x = reduced ? input.to(at::kFloat).contiguous() : input.contiguous();
    const int64_t channels = x.size(1);
    const auto dims = reduced_dims(x);
    const int64_t local_count = channels > 0 ? x.numel() / channels : 0;
    const auto stats_options = x.options().dtype(at::kDouble);

    // This rank's per-channel sum and sum of squares, from its own (numerically stable) mean and biased variance.
    at::Tensor packed = at::zeros({2 * channels + 1}, stats_options);
    if (local_count > 0) {
      auto [var, mean] = at::var_mean(x, at::IntArrayRef(dims), /*unbiased=*/false, /*keepdim=*/false);
      at::Tensor mean64 = mean.to(at::kDouble), var64 = var.to(at::kDouble);
      const double n = static_cast<double>(local_count);
      packed.narrow(0, 0, channels).copy_(mean64 * n);
      packed.narrow(0, channels, channels).copy_((var64 + mean64 * mean64) * n);
      packed[2 * channels].fill_(n);
    }
    comm->allreduce_sum(packed);

    const double count = packed[2 * channels].item<double>();
    if (count <= 1) {
      throw UsageError(
          fmt::format("SyncBatchNorm: all ranks together hold {} value(s) per channel (this rank's input has "
                      "shape [{}]); training needs more than 1 (raise train.batch_size)",
                      static_cast<long long>(count), fmt::join(x.sizes(), ", ")));
    }
    at::Tensor mean64 = packed.narrow(0, 0, channels) / count;
    at::Tensor var64 = (packed.narrow(0, channels, channels) / count - mean64 * mean64).clamp_min(0.0);
    at::Tensor invstd64 = (var64 + eps).rsqrt();
    if (running_mean.defined()) running_mean.mul_(1 - momentum).add_(mean64.to(running_mean.scalar_type()), momentum);
    if (running_var.defined()) {
      running_var.mul_(1 - momentum).add_((var64 * (count / (count - 1))).to(running_var.scalar_type()), momentum);
    }

    const at::Tensor mean = mean64.to(x.scalar_type()), invstd = invstd64.to(x.scalar_type());
    at::Tensor scale = weight.defined() ? invstd * weight : invstd;
    at::Tensor shift = bias.defined() ? bias - mean * scale : -mean * scale;
    at::Tensor output = (x * per_channel(scale, x) + per_channel(shift, x)).to(input.scalar_type());

    ctx->save_for_backward({x, weight, mean, invstd});
    ctx->saved_data["count"] = count;
    ctx->saved_data["comm"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(comm));
    ctx->saved_data["weight_edge"] = static_cast<int64_t>(weight.defined() ? 1 : -1);
    ctx->saved_data["bias_edge"] = static_cast<int64_t>(bias.defined() ? (weight.defined() ? 2 : 1) : -1);
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const double count = ctx->saved_data["count"].toDouble();
    auto* comm = reinterpret_cast<Communicator*>(static_cast<std::intptr_t>(ctx->saved_data["comm"].toInt()));
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous();  // autograd casts the result back
    const auto dims = reduced_dims(x);
    const int64_t channels = x.size(1);

    const at::Tensor xmu = x - per_channel(mean, x);
    at::Tensor sum_dy = dy.sum(dims);
    at::Tensor sum_dy_xmu = (dy * xmu).sum(dims);

    at::Tensor grad_input, grad_weight, grad_bias;
    const auto weight_edge = ctx->saved_data["weight_edge"].toInt(), bias_edge = ctx->saved_data["bias_edge"].toInt();
    if (weight_edge >= 0 && ctx->needs_input_grad(static_cast<std::size_t>(weight_edge)))
      grad_weight = sum_dy_xmu * invstd;
    if (bias_edge >= 0 && ctx->needs_input_grad(static_cast<std::size_t>(bias_edge))) grad_bias = sum_dy.clone();
    if (ctx->needs_input_grad(0)) {
      at::Tensor packed = at::cat({sum_dy, sum_dy_xmu});
      comm->allreduce_sum(packed);
      const at::Tensor mean_dy = packed.narrow(0, 0, channels) / count;
      const at::Tensor mean_dy_xmu = packed.narrow(0, channels, channels) / count;
      const at::Tensor gain = weight.defined() ? invstd * weight : invstd;
      grad_input =
          (dy - per_channel(mean_dy, x) - xmu * per_channel(invstd * invstd * mean_dy_xmu, x)) * per_channel(gain, x);
    }
    // One gradient per forward argument: input, weight, bias, settings.
    return {grad_input, grad_weight, grad_bias, at::Tensor()};
  }
};

}  // namespace

at::Tensor sync_batch_norm_training(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                    const at::Tensor& running_mean, const at::Tensor& running_var, double momentum,
                                    double eps, Communicator& comm) {
  const ForwardSettings settings{running_mean, running_var, momentum, eps, &comm};
  const torch_compat::optional<at::Tensor> weight_arg =
      weight.defined() ? torch_compat::optional<at::Tensor>(weight) : torch_compat::nullopt;
  const torch_compat::optional<at::Tensor> bias_arg =
      bias.defined() ? torch_compat::optional<at::Tensor>(bias) : torch_compat::nullopt;
  return SyncBatchNormFunction::apply(input, weight_arg, bias_arg, &settings);
}

at::Tensor sync_batch_norm_forward(const at::Tensor& input, BatchNormTensors& layer, bool training,
                                   Communicator& comm) {
  // As torch.nn.modules.batchnorm._BatchNorm / SyncBatchNorm.forward.
  double factor = layer.momentum.value_or(0.0);
  const bool tracking = layer.running_mean.defined() && layer.running_var.defined();
  if (training && layer.num_batches_tracked.defined()) {
    at::NoGradGuard no_grad;
    layer.num_batches_tracked.add_(1);
    if (!layer.momentum) factor = 1.0 / layer.num_batches_tracked.item<double>();
  }
  const bool batch_statistics = training || !tracking;  // eval without running statistics uses the batch's
  const at::Tensor running_mean = !training || tracking ? layer.running_mean : at::Tensor();
  const at::Tensor running_var = !training || tracking ? layer.running_var : at::Tensor();
  if (batch_statistics && training && !comm.single_process()) {
    return sync_batch_norm_training(input, layer.weight, layer.bias, running_mean, running_var, factor, layer.eps,
                                    comm);
  }
  return at::batch_norm(input, layer.weight, layer.bias, running_mean, running_var, batch_statistics, factor, layer.eps,
                        /*cudnn_enabled=*/true);
}

int convert_to_sync_batch_norm(torch::nn::Module& root, Communicator& comm) {
  int converted = 0;
  root.apply([&](torch::nn::Module& module) {
    auto* bn = dynamic_cast<layers::BatchNorm2d*>(&module);
    if (!bn) return;
    Communicator* group = &comm;
    bn->synchronised_forward = [bn, group](const at::Tensor& x) {
      // The layer's current tensors (to() may have replaced them) and its fixed settings.
      BatchNormTensors tensors{bn->weight,
                               bn->bias,
                               bn->running_mean,
                               bn->running_var,
                               bn->num_batches_tracked,
                               layers::BatchNorm2d::kMomentum,
                               layers::BatchNorm2d::kEps};
      return sync_batch_norm_forward(x, tensors, bn->is_training(), *group);
    };
    ++converted;
  });
  return converted;
}

int revert_sync_batch_norm(torch::nn::Module& root) {
  int reverted = 0;
  root.apply([&](torch::nn::Module& module) {
    auto* bn = dynamic_cast<layers::BatchNorm2d*>(&module);
    if (!bn || !bn->synchronised_forward) return;
    bn->synchronised_forward = nullptr;
    ++reverted;
  });
  return reverted;
}

int convert_to_sync_batch_norm(Model& model, Communicator& comm) {
  auto* layered = dynamic_cast<LayerModel*>(&model);
  return layered ? convert_to_sync_batch_norm(*layered->module(), comm) : 0;
}

int apply_sync_batch_norm(const DdpConfig& ddp, Model& model, Communicator& comm) {
  if (!ddp.sync_batch_norm) return 0;
  if (ddp.strategy ==
      Strategy::Dp) {  // one process: torch.nn.SyncBatchNorm, too, works only with DistributedDataParallel
    log::warn(
        "ddp.sync_batch_norm is ignored with ddp.strategy: dp (one process, no ranks to synchronise with; use "
        "ddp.strategy: ddp with one rank per GPU)");
    return 0;
  }
  const int converted = convert_to_sync_batch_norm(model, comm);
  if (converted == 0 && comm.rank() == 0) {
    log::warn(
        "ddp.sync_batch_norm is true, but the model ({}) has no BatchNorm layer to synchronise (built-in cnn with "
        "model.batch_norm and resnet have them; a torchscript model's are not converted); training goes on unchanged",
        model.summary());
  }
  return converted;
}

std::string sync_batch_norm_note(int synchronised) {
  if (synchronised <= 0) return "";
  return fmt::format(", {} BatchNorm layer{} synchronised", synchronised, synchronised == 1 ? "" : "s");
}

}  // namespace mgtrain
