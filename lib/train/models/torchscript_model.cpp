// The `torchscript` model: a user's torch.jit.script-ed module loaded from a file and trained as is.
// The only TU that includes the TorchScript headers.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include "train/data/data_file.hpp"
#include "train/models/model_builders.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

class TorchScriptModel final : public Model {
 public:
  TorchScriptModel(torch::jit::Module module, std::string path) : module_(std::move(module)), path_(std::move(path)) {}

  at::Tensor forward(const at::Tensor& inputs) override {
    const c10::IValue out = module_.forward({inputs});
    if (!out.isTensor()) {
      throw UsageError(fmt::format("{}: forward() returned a {}, not a Tensor of logits", path_, out.tagKind()));
    }
    return out.toTensor();
  }
  NamedTensors named_parameters() override {
    NamedTensors out;
    for (const auto& named : module_.named_parameters(/*recurse=*/true)) out.emplace_back(named.name, named.value);
    return out;
  }
  NamedTensors named_buffers() override {
    NamedTensors out;
    for (const auto& named : module_.named_buffers(/*recurse=*/true)) out.emplace_back(named.name, named.value);
    return out;
  }
  void train(bool on) override { module_.train(on); }
  void to(const c10::Device& device) override { module_.to(device); }
  std::string summary() const override {
    int64_t count = 0;
    for (const auto& p : module_.parameters(/*recurse=*/true)) count += p.numel();
    return fmt::format("torchscript {} ({}), {} parameters", path_, module_.type()->name()->qualifiedName(), count);
  }

 private:
  mutable torch::jit::Module module_;  // parameters() is not const in TorchScript's API
  std::string path_;
};

}  // namespace

std::unique_ptr<Model> build_torchscript_model(const ModelConfig& config, const ModelInput&) {
  const std::string& path = config.path;
  if (path.empty())
    throw UsageError("model.type torchscript needs model.path (a file saved by torch.jit.script(model).save(path))");
  if (!data_file_exists(path)) throw UsageError(fmt::format("model.path {}: no such file", path));
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    throw UsageError(fmt::format("model.path {}: not a loadable TorchScript module: {}", path,
                                 first_line(e.what_without_backtrace())));
  }
  if (!module.find_method("forward"))
    throw UsageError(fmt::format("model.path {}: the module has no forward() method", path));
  bool any_trainable = false;
  for (const auto& p : module.parameters(/*recurse=*/true)) any_trainable = any_trainable || p.requires_grad();
  if (!any_trainable) throw UsageError(fmt::format("model.path {}: the module has no trainable parameters", path));
  module.train(true);
  return std::make_unique<TorchScriptModel>(std::move(module), path);
}

}  // namespace mgtrain
