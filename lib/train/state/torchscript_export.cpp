// Exports a training checkpoint's model as a TorchScript module (see torchscript_export.hpp): rebuild the model
// from the checkpoint's config, copy its weights, mirror its layer tree as TorchScript submodules, check the
// forward, write the file atomically.
#include "train/state/torchscript_export.hpp"
#include "util/json_text.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <regex>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.hpp"
#include "config/config_loader.hpp"
#include "train/data/data_file.hpp"
#include "train/models/layer_model.hpp"
#include "train/models/layers.hpp"
#include "train/models/model.hpp"
#include "train/state/train_state.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// ---- the model and its weights -------------------------------------------------------------------------------

// The "model/" tensors of the checkpoint, in file order, without the prefix.
std::vector<std::pair<std::string, const TensorEntry*>> model_entries(const CheckpointFile& file) {
  std::vector<std::pair<std::string, const TensorEntry*>> out;
  for (const TensorEntry& t : file.tensors())
    if (starts_with(t.name, "model/")) out.emplace_back(t.name.substr(6), &t);
  return out;
}

// What the data set told the model when it was trained, recovered without opening the data (which need not exist
// where the export runs): the classes from the output layer's weight (the last 2-D "weight" tensor: mlp's last
// Linear, cnn's classifier, resnet's fc, gpt's lm_head), the sample shape from the model summary ("cnn on 1x28x28:
// ...") or the data: section (mnist 1x28x28, cifar10 3x32x32, synthetic data.input_shape, tokens context_length).
// A wrong guess cannot go unnoticed: the weights are then checked shape by shape against the rebuilt model.
ModelInput infer_model_input(const Config& config, const CheckpointFile& file) {
  ModelInput input;
  const auto entries = model_entries(file);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (ends_with(it->first, "weight") && it->second->shape.size() == 2) {
      input.num_classes = it->second->shape[0];
      break;
    }
  }
  if (config.model.type == ModelType::Gpt || config.data.dataset == DatasetKind::Tokens) {
    input.sample_shape = {config.model.context_length};
    return input;
  }
  const auto summary = file.metadata().find("mgtrain.model");
  std::smatch m;
  static const std::regex on_shape(R"( on ([0-9]+(?:x[0-9]+)+)[ :,(])");
  if (summary != file.metadata().end() && std::regex_search(summary->second, m, on_shape)) {
    for (const std::string& d : split(m[1].str(), 'x')) input.sample_shape.push_back(std::stoll(d));
  } else if (config.data.dataset == DatasetKind::Synthetic) {
    input.sample_shape = config.data.input_shape;
  } else if (config.data.dataset == DatasetKind::Cifar10) {
    input.sample_shape = {3, 32, 32};
  } else {
    input.sample_shape = {1, 28, 28};
  }
  if (config.model.type == ModelType::Mlp && !entries.empty() && entries.front().second->shape.size() == 2) {
    // mlp flattens its input: only the width matters, and the first Linear knows it.
    int64_t width = 1;
    for (int64_t d : input.sample_shape) width *= d;
    if (width != entries.front().second->shape[1]) input.sample_shape = {entries.front().second->shape[1]};
  }
  return input;
}

// Copies the checkpoint's "model/" tensors into `tensors` (a model's parameters then buffers), after checking that
// the names, shapes and dtypes are exactly the model's.
void copy_weights(const NamedTensors& tensors, const CheckpointFile& file, const std::string& what) {
  for (const auto& [name, tensor] : tensors) {
    const TensorEntry* entry = file.find("model/" + name);
    if (!entry) {
      throw UsageError(fmt::format("{}: model/{} of {} is not in the checkpoint (were the model: settings changed?)",
                                   file.path(), name, what));
    }
    const std::string dtype = dtype_name(tensor.scalar_type());
    if (entry->dtype != dtype || at::IntArrayRef(entry->shape) != tensor.sizes()) {
      throw UsageError(fmt::format("{}: model/{} is {} {} in the checkpoint and {} {} in {}", file.path(), name,
                                   entry->dtype, shape_text(entry->shape), dtype, shape_text(tensor.sizes().vec()),
                                   what));
    }
  }
  for (const auto& [name, entry] : model_entries(file)) {
    const bool known = std::any_of(tensors.begin(), tensors.end(), [&n = name](const auto& t) { return t.first == n; });
    if (!known) throw UsageError(fmt::format("{}: model/{} is not a tensor of {}", file.path(), name, what));
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : tensors) {
    const TensorEntry* entry = file.find("model/" + name);
    at::Tensor staged = at::empty(tensor.sizes(), tensor.options().device(at::kCPU).requires_grad(false));
    if (entry->nbytes > 0) std::memcpy(staged.data_ptr(), file.bytes(*entry), entry->nbytes);  // bytes may be unaligned
    at::Tensor target = tensor;
    target.copy_(staged);
  }
}

NamedTensors named_tensors_of(Model& model) {
  NamedTensors all = model.named_parameters();
  for (auto& b : model.named_buffers()) all.push_back(std::move(b));
  return all;
}

// ---- TorchScript mirror of the layer tree ---------------------------------------------------------------------

// One TorchScript module per layer. All share one compilation unit; class names are Python's layer names
// ("__torch__.mgtrain.Linear", mangled when repeated), so Python shows RecursiveScriptModule(original_name=Linear).
class ScriptBuilder {
 public:
  explicit ScriptBuilder(const ModelConfig& config)
      : config_(config), cu_(std::make_shared<torch::jit::CompilationUnit>()) {}

  torch::jit::Module build(torch::nn::Module& layer, const std::string& path) {
    using namespace layers;
    const std::string where = path.empty() ? "the model" : "layer " + path;
    std::string kind, body;
    std::vector<std::pair<std::string, torch::nn::Module*>> children;
    for (const auto& child : layer.named_children()) children.emplace_back(child.key(), child.value().get());

    if (dynamic_cast<Sequence*>(&layer)) {
      kind = "Sequential";
      for (const auto& child : children) body += fmt::format("    x = getattr(self, \"{}\").forward(x)\n", child.first);
      body += "    return x\n";
    } else if (auto* l = dynamic_cast<Linear*>(&layer)) {
      kind = "Linear";
      body = l->bias.defined() ? "    return torch.linear(x, self.weight, self.bias)\n"
                               : "    return torch.linear(x, self.weight)\n";
    } else if (auto* c = dynamic_cast<Conv2d*>(&layer)) {
      kind = "Conv2d";
      body =
          fmt::format("    return torch.conv2d(x, self.weight, {}, [{}, {}], [{}, {}])\n",
                      c->bias.defined() ? "self.bias" : "None", c->stride(), c->stride(), c->padding(), c->padding());
    } else if (dynamic_cast<BatchNorm2d*>(&layer)) {
      kind = "BatchNorm2d";  // momentum 0.1, eps 1e-5 as in layers.cpp
      body =
          "    if self.training:\n"
          "        self.num_batches_tracked.add_(1)\n"
          "    return torch.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, self.training, "
          "0.1, "
          "1e-05, True)\n";
    } else if (auto* n = dynamic_cast<LayerNorm*>(&layer)) {
      kind = "LayerNorm";  // eps 1e-5 as in layers.cpp
      body =
          fmt::format("    return torch.layer_norm(x, [{}], self.weight, self.bias, 1e-05, True)\n", n->weight.size(0));
    } else if (dynamic_cast<Embedding*>(&layer)) {
      kind = "Embedding";
      body = "    return torch.embedding(self.weight, x)\n";
    } else if (dynamic_cast<ReLU*>(&layer)) {
      kind = "ReLU";
      body = "    return torch.relu(x)\n";
    } else if (dynamic_cast<Flatten*>(&layer)) {
      kind = "Flatten";
      body = "    return torch.flatten(x, 1)\n";
    } else if (auto* p = dynamic_cast<MaxPool2d*>(&layer)) {
      kind = "MaxPool2d";
      body = fmt::format("    return torch.max_pool2d(x, [{0}, {0}], [{0}, {0}])\n", p->kernel());
    } else if (auto* d = dynamic_cast<Dropout*>(&layer)) {
      kind = "Dropout";
      body = d->p() > 0
                 ? fmt::format("    if self.training:\n        return torch.dropout(x, {:.17g}, True)\n    return x\n",
                               d->p())
                 : "    return x\n";
    } else {
      composite(children, where, kind, body);
    }

    torch::jit::Module module(c10::QualifiedName("__torch__.mgtrain." + kind), cu_, /*shouldMangle=*/true);
    module.register_attribute("training", c10::BoolType::get(), false);
    // Parameters and buffers of this layer itself (not of its children), in registration order.
    for (const auto& p : layer.named_parameters(/*recurse=*/false))
      module.register_parameter(p.key(), p.value(), /*is_buffer=*/false);
    for (const auto& b : layer.named_buffers(/*recurse=*/false)) module.register_buffer(b.key(), b.value());
    for (const auto& [name, child] : children)
      module.register_module(name, build(*child, path.empty() ? name : path + "." + name));
    const std::string source = "def forward(self, x: Tensor) -> Tensor:\n" + body;
    try {
      module.define(source);
    } catch (const std::exception& e) {
      throw Error(fmt::format("internal error: the TorchScript of {} ({}) does not compile: {}\n{}", where, kind,
                              e.what(), source));
    }
    return module;
  }

 private:
  // The layers with a forward of their own (model files' private classes), recognised by their children's names.
  void composite(const std::vector<std::pair<std::string, torch::nn::Module*>>& children, const std::string& where,
                 std::string& kind, std::string& body) const {
    std::vector<std::string> names;
    for (const auto& child : children) names.push_back(child.first);
    using Names = std::vector<std::string>;
    if (names == Names{"features", "classifier"}) {  // cnn
      kind = "Cnn";
      body = "    return self.classifier.forward(self.features.forward(x))\n";
    } else if (names == Names{"conv1", "bn1", "layer1", "layer2", "layer3", "fc"}) {  // resnet
      kind = "ResNet";
      body =
          "    y = torch.relu(self.bn1.forward(self.conv1.forward(x)))\n"
          "    y = self.layer3.forward(self.layer2.forward(self.layer1.forward(y)))\n"
          "    return self.fc.forward(torch.mean(y, [2, 3]))\n";
    } else if (names == Names{"conv1", "bn1", "conv2", "bn2"} ||
               names == Names{"conv1", "bn1", "conv2", "bn2", "downsample"}) {
      kind = "BasicBlock";
      body = fmt::format(
          "    y = self.bn2.forward(self.conv2.forward(torch.relu(self.bn1.forward(self.conv1.forward(x)))))\n"
          "    return torch.relu(y + {})\n",
          names.size() == 5 ? "self.downsample.forward(x)" : "x");
    } else if (names == Names{"transformer", "lm_head"}) {  // gpt
      kind = "GPT";  // (`raise` needs Python's resolver; `assert` compiles without one)
      body = fmt::format(
          "    assert x.dim() == 2 and x.size(1) >= 1 and x.size(1) <= {0}, "
          "\"gpt: inputs must be [batch, T] token ids with 1 <= T <= model.context_length = {0}\"\n"
          "    return self.lm_head.forward(self.transformer.forward(x))\n",
          config_.context_length);
    } else if (names == Names{"wte", "wpe", "drop", "h", "ln_f"}) {
      kind = "Transformer";
      // dtypes as ScalarType numbers: define()'s resolver has no torch.long / torch.bool (saved code spells them so
      // too)
      body = fmt::format("    positions = torch.arange(x.size(1), dtype={}, device=x.device)\n",
                         static_cast<int>(at::kLong)) +
             "    y = self.drop.forward(self.wte.forward(x) + self.wpe.forward(positions))\n"
             "    return self.ln_f.forward(self.h.forward(y))\n";
    } else if (names == Names{"ln_1", "attn", "ln_2", "mlp"}) {
      kind = "Block";
      body =
          "    y = x + self.attn.forward(self.ln_1.forward(x))\n"
          "    return y + self.mlp.forward(self.ln_2.forward(y))\n";
    } else if (names == Names{"c_attn", "c_proj", "attn_dropout", "resid_dropout"}) {
      kind = "CausalSelfAttention";
      const int64_t heads = config_.heads;
      const auto* c_attn = children[0].second->as<layers::Linear>();
      const int64_t d_model = c_attn ? c_attn->weight.size(1) : config_.d_model;
      const double scale = 1.0 / std::sqrt(static_cast<double>(d_model / heads));  // as gpt_model.cpp, in double
      body = fmt::format(
          "    B = x.size(0)\n"
          "    T = x.size(1)\n"
          "    d = x.size(2)\n"
          "    hd = d // {0}\n"
          "    qkv = self.c_attn.forward(x).split(d, 2)\n"
          "    q = qkv[0].view([B, T, {0}, hd]).transpose(1, 2)\n"
          "    k = qkv[1].view([B, T, {0}, hd]).transpose(1, 2)\n"
          "    v = qkv[2].view([B, T, {0}, hd]).transpose(1, 2)\n"
          "    scores = torch.matmul(q, k.transpose(-2, -1)).mul_({1:.17g})\n"
          "    future = torch.ones([T, T], dtype={2}, device=x.device).triu_(1)\n"
          "    scores.masked_fill_(future, float(\"-inf\"))\n"
          "    weights = self.attn_dropout.forward(torch.softmax(scores, -1))\n"
          "    y = torch.matmul(weights, v).transpose(1, 2).contiguous().view([B, T, d])\n"
          "    return self.resid_dropout.forward(self.c_proj.forward(y))\n",
          heads, scale, static_cast<int>(at::kBool));
    } else if (names == Names{"c_fc", "c_proj", "dropout"}) {
      kind = "MLP";
      body = "    return self.dropout.forward(self.c_proj.forward(torch.gelu(self.c_fc.forward(x))))\n";
    } else {
      throw Error(fmt::format("internal error: no TorchScript for {} of model.type {} (children: {})", where,
                              name_of(config_.type), fmt::join(names, ", ")));
    }
  }

  const ModelConfig& config_;
  std::shared_ptr<torch::jit::CompilationUnit> cu_;
};

// A fixed input for the forward check: two samples.
at::Tensor check_input(const ModelInput& input, bool tokens) {
  std::vector<int64_t> shape{2};
  shape.insert(shape.end(), input.sample_shape.begin(), input.sample_shape.end());
  auto generator = at::detail::createCPUGenerator(20240611);
  if (tokens)
    return at::randint(0, std::max<int64_t>(input.num_classes, 1), shape, generator,
                       at::TensorOptions().dtype(at::kLong));
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kFloat));
}

at::Tensor run_forward(torch::jit::Module& module, const at::Tensor& x, const std::string& what) {
  const c10::IValue out = module.forward({x});
  if (!out.isTensor()) throw Error(fmt::format("{}: forward() returned a {}, not a Tensor", what, out.tagKind()));
  return out.toTensor();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

namespace {

// The checkpoint, and the config it was trained with (its mgtrain.config metadata).
std::pair<CheckpointFile, Config> read_checkpoint_and_config(const std::string& checkpoint_path) {
  CheckpointFile file = [&] {
    try {
      return read_checkpoint_file(checkpoint_path);
    } catch (const CorruptCheckpoint& e) {
      throw UsageError(e.what());
    }
  }();
  const auto config_text = file.metadata().find("mgtrain.config");
  if (config_text == file.metadata().end()) {
    throw UsageError(
        fmt::format("{}: no mgtrain.config metadata; not a checkpoint written by mgtrain's trainer", checkpoint_path));
  }
  LoadOptions options;
  options.resolved = true;
  Config config =
      load_config_text(config_text->second, checkpoint_path + " (mgtrain.config)", ConfigRequest{}, EnvMap{}, options)
          .config;
  return {std::move(file), std::move(config)};
}

// A module, and what its forward should give on `input` (undefined: the forward cannot be checked).
struct ScriptedModel {
  torch::jit::Module module;
  std::string summary;
  at::Tensor input, expected;
};

// model.type torchscript: the user's module at model.path with the checkpoint's weights.
ScriptedModel script_user_module(const Config& config, const CheckpointFile& file, const std::string& checkpoint_path) {
  const std::string& path = config.model.path;
  if (!data_file_exists(path)) {
    throw UsageError(fmt::format(
        "{}: the model is the TorchScript module model.path = {}, which is needed to export it: no such file "
        "(relative paths are relative to where training ran)",
        checkpoint_path, path));
  }
  ScriptedModel scripted;
  try {
    scripted.module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    throw UsageError(fmt::format("model.path {}: not a loadable TorchScript module: {}", path,
                                 first_line(e.what_without_backtrace())));
  }
  NamedTensors tensors;
  for (const auto& p : scripted.module.named_parameters(/*recurse=*/true)) tensors.emplace_back(p.name, p.value);
  for (const auto& b : scripted.module.named_buffers(/*recurse=*/true)) tensors.emplace_back(b.name, b.value);
  copy_weights(tensors, file, "the module at " + path);
  scripted.module.eval();
  scripted.summary =
      file.metadata().count("mgtrain.model") ? file.metadata().at("mgtrain.model") : "torchscript " + path;
  // The model's forward is the module's own: the saved bytes are checked against it on an input of the data's
  // shape, when that shape is known and the module takes it (else only the weights are checked).
  try {
    const at::Tensor x = check_input(infer_model_input(config, file), config.data.dataset == DatasetKind::Tokens);
    at::NoGradGuard no_grad;
    scripted.expected = run_forward(scripted.module, x, path);
    scripted.input = x;
  } catch (const std::exception&) {
    scripted.expected = at::Tensor();
  }
  return scripted;
}

// A built-in model: built from the config, given the checkpoint's weights, and scripted layer by layer.
ScriptedModel script_builtin_model(const Config& config, const CheckpointFile& file) {
  const ModelInput model_input = infer_model_input(config, file);
  at::manual_seed(0);  // initial values are overwritten by the checkpoint's
  std::unique_ptr<Model> model = build_model(config.model, model_input);
  copy_weights(named_tensors_of(*model), file,
               fmt::format("the {} model built from the checkpoint's config", config.model.type));
  model->train(false);
  auto* layered = dynamic_cast<LayerModel*>(model.get());
  if (!layered) throw Error(fmt::format("internal error: model.type {} is not a layer tree", config.model.type));
  ScriptedModel scripted;
  ScriptBuilder builder(config.model);
  scripted.module = builder.build(*layered->module(), "");
  scripted.module.eval();
  scripted.summary = model->summary();
  scripted.input = check_input(model_input, config.model.type == ModelType::Gpt);
  at::NoGradGuard no_grad;
  scripted.expected = model->forward(scripted.input);
  return scripted;
}

// The module's bytes with an mgtrain.json extra file saying what it is.
std::string module_bytes(torch::jit::Module& module, const std::string& summary, const std::string& step,
                         const std::string& source_name) {
  std::ostringstream bytes;
  torch::jit::ExtraFilesMap extra;
  nlohmann::ordered_json about = {{"model", summary}, {"step", nullptr}, {"source", source_name}};
  if (auto step_number = parse_int(step)) about["step"] = *step_number;
  extra["mgtrain.json"] = json_text(about) + "\n";
  module.save(bytes, extra);
  return bytes.str();
}

// Loads the bytes back and checks them against the model before anything is written: the forward on the
// check input, else every parameter against the checkpoint. Returns what was checked.
std::string check_saved_module(const std::string& data, const ScriptedModel& scripted, const CheckpointFile& file,
                               const std::string& out_path) {
  std::istringstream in(data);
  torch::jit::Module loaded = torch::jit::load(in, c10::Device(c10::kCPU));
  loaded.eval();
  if (scripted.expected.defined()) {
    at::NoGradGuard no_grad;
    const at::Tensor got = run_forward(loaded, scripted.input, out_path);
    if (got.sizes() != scripted.expected.sizes()) {
      throw Error(fmt::format("internal error: the exported module's forward gives shape {} where the model gives {}",
                              shape_text(got.sizes().vec()), shape_text(scripted.expected.sizes().vec())));
    }
    const double diff = (got - scripted.expected).abs().max().item<double>();
    const double scale = scripted.expected.abs().max().item<double>();
    if (!(diff <= 1e-5 * std::max(1.0, scale))) {
      throw Error(fmt::format(
          "internal error: the exported module's forward differs from the model's by up to {} on a {} input", diff,
          shape_text(scripted.input.sizes().vec())));
    }
    return fmt::format("forward matches the model on a {} input (max |diff| {:g})",
                       shape_text(scripted.input.sizes().vec()), diff);
  }
  std::size_t count = 0;
  for (const auto& p : loaded.named_parameters(/*recurse=*/true)) {
    const TensorEntry* entry = file.find("model/" + p.name);
    const at::Tensor value = p.value.contiguous();
    if (!entry || entry->nbytes != value.nbytes() ||
        std::memcmp(file.bytes(*entry), value.data_ptr(), entry->nbytes) != 0) {
      throw Error(
          fmt::format("internal error: the exported module's parameter {} differs from the checkpoint's", p.name));
    }
    ++count;
  }
  return fmt::format("the {} reloaded parameters equal the checkpoint's", count);
}

}  // namespace

TorchScriptExportResult export_torchscript(const std::string& checkpoint_path, const std::string& out_path,
                                           bool force) {
  if (!file_exists(checkpoint_path)) throw UsageError(fmt::format("{}: no such file", checkpoint_path));
  if (file_exists(out_path) && !force) {
    throw UsageError(fmt::format("{} exists; add --force to overwrite it, or choose another file with -o", out_path));
  }
  const auto [file, config] = read_checkpoint_and_config(checkpoint_path);
  if (config.model.type == ModelType::Registered) {
    throw UsageError(
        fmt::format("{}: model.type {} is a model a worker registered: its C++ code cannot be written as "
                    "TorchScript here; export its weights as safetensors (mgtrain export {}, the default "
                    "format) and load them into the same network in Python",
                    checkpoint_path, config.model.registered, checkpoint_path));
  }
  ScriptedModel scripted = config.model.type == ModelType::Torchscript
                               ? script_user_module(config, file, checkpoint_path)
                               : script_builtin_model(config, file);
  const std::string step = file.metadata().count("mgtrain.step") ? file.metadata().at("mgtrain.step") : "";
  const std::string data =
      module_bytes(scripted.module, scripted.summary, step, checkpoint_path.substr(checkpoint_path.rfind('/') + 1));
  TorchScriptExportResult result;
  result.model = scripted.summary;
  result.check = check_saved_module(data, scripted, file, out_path);
  AtomicFileWriter writer(out_path);
  writer.write(data.data(), data.size());
  writer.commit();
  return result;
}

int run_torchscript_export(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  bool force = false;
  for (const auto& arg : args) {
    if (arg == "--force") {
      force = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError(fmt::format(
          "--export-torchscript: unknown flag {}; usage: mgtrain-worker --export-torchscript CHECKPOINT OUT [--force]",
          arg));
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) throw UsageError("usage: mgtrain-worker --export-torchscript CHECKPOINT OUT [--force]");
  const TorchScriptExportResult result = export_torchscript(positional[0], positional[1], force);
  std::printf("%s: TorchScript of %s; %s\n", positional[1].c_str(), result.model.c_str(), result.check.c_str());
  return exit_code::kSuccess;
}

}  // namespace mgtrain
