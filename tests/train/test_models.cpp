// The built-in models and the TorchScript loader: shapes, Python's parameter names and order, deterministic init,
// equality with Python's nn.Sequential MLP, GPT causality, and training a scripted module.
#include "catch_with_torch.hpp"

#include <cstring>
#include <sstream>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include "train/models/model.hpp"
#include "train_test_support.hpp"
#include "util/error.hpp"

using Catch::Matchers::Contains;
using mgtrain::Model;
using mgtrain::ModelConfig;
using mgtrain::ModelInput;

namespace {

std::vector<std::string> names_of(const mgtrain::NamedTensors& named) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : named) names.push_back(name);
  return names;
}

std::vector<std::vector<int64_t>> shapes_of(const mgtrain::NamedTensors& named) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& [name, tensor] : named) shapes.push_back(tensor.sizes().vec());
  return shapes;
}

std::unique_ptr<Model> build(const ModelConfig& config, const ModelInput& input, uint64_t seed = 0) {
  torch::manual_seed(seed);
  return mgtrain::build_model(config, input);
}

ModelConfig config_of(const std::string& type) {
  ModelConfig c;
  c.type = mgtrain::parse_enum<mgtrain::ModelType>(type).value();
  return c;
}

bool same_parameters(Model& a, Model& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (pa[i].first != pb[i].first || !pa[i].second.equal(pb[i].second)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("mlp: Python's nn.Sequential layout, shapes and deterministic init") {
  ModelConfig config = config_of("mlp");
  config.hidden_sizes = {1024, 1024};
  const ModelInput input{{1, 28, 28}, 10};
  auto model = build(config, input, 1);
  CHECK(names_of(model->named_parameters()) ==
        std::vector<std::string>{"1.weight", "1.bias", "3.weight", "3.bias", "5.weight", "5.bias"});
  CHECK(shapes_of(model->named_parameters()) ==
        std::vector<std::vector<int64_t>>{{1024, 784}, {1024}, {1024, 1024}, {1024}, {10, 1024}, {10}});
  CHECK(model->named_buffers().empty());
  CHECK(mgtrain::parameter_count(*model) == 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 10 * 1024 + 10);
  CHECK_THAT(model->summary(), Contains("mlp 784-1024-1024-10"));
  CHECK(model->forward(at::randn({3, 1, 28, 28})).sizes() == at::IntArrayRef({3, 10}));
  auto again = build(config, input, 1);
  auto other = build(config, input, 2);
  CHECK(same_parameters(*model, *again));
  CHECK_FALSE(same_parameters(*model, *other));

  config.dropout = 0.5;
  auto with_dropout = build(config, input, 1);
  CHECK(names_of(with_dropout->named_parameters()) ==
        std::vector<std::string>{"1.weight", "1.bias", "4.weight", "4.bias", "7.weight", "7.bias"});
}

TEST_CASE("mlp: identical to Python's nn.Sequential under the same torch.manual_seed") {
  const std::string why = mgtrain::test::python_torch_unavailable_reason();
  if (!why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  mgtrain::test::TempDir dir;
  const char* script = R"(
import sys, torch
from torch import nn
torch.manual_seed(7)
net = nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
torch.manual_seed(11)
x = torch.randn(4, 1, 28, 28)
with open(sys.argv[1], 'wb') as f:
    for name, p in net.named_parameters():
        f.write(p.detach().numpy().tobytes())
    f.write(net(x).detach().numpy().tobytes())
print(' '.join(name for name, _ in net.named_parameters()))
)";
  const auto out = mgtrain::test::run_reference_python(script, {dir / "reference.bin"});
  REQUIRE(out);
  ModelConfig config = config_of("mlp");
  config.hidden_sizes = {1024, 1024};
  auto model = build(config, ModelInput{{1, 28, 28}, 10}, 7);
  CHECK(fmt::format("{}\n", fmt::join(names_of(model->named_parameters()), " ")) == *out);
  const auto reference = mgtrain::test::read_bytes(dir / "reference.bin");
  size_t offset = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    const size_t bytes = p.numel() * sizeof(float);
    REQUIRE(offset + bytes <= reference.size());
    INFO(name);
    CHECK(std::memcmp(p.data_ptr<float>(), reference.data() + offset, bytes) == 0);  // bit for bit
    offset += bytes;
  }
  torch::manual_seed(11);
  const at::Tensor logits = model->forward(at::randn({4, 1, 28, 28}));
  REQUIRE(offset + 40 * sizeof(float) == reference.size());
  const at::Tensor expected = at::from_blob(const_cast<uint8_t*>(reference.data() + offset), {4, 10}, at::kFloat);
  CHECK(logits.allclose(expected, 1e-5, 1e-6));
}

TEST_CASE("cnn: blocks, names, batch norm buffers, train/eval") {
  ModelConfig config = config_of("cnn");  // defaults: channels 32, 64; batch norm; fc 128
  const ModelInput input{{1, 28, 28}, 10};
  auto model = build(config, input);
  CHECK(names_of(model->named_parameters()) ==
        std::vector<std::string>{"features.0.weight", "features.1.weight", "features.1.bias", "features.4.weight",
                                 "features.5.weight", "features.5.bias", "classifier.1.weight", "classifier.1.bias",
                                 "classifier.3.weight", "classifier.3.bias"});
  CHECK(shapes_of(model->named_parameters())[6] == std::vector<int64_t>{128, 64 * 7 * 7});
  CHECK(names_of(model->named_buffers()) ==
        std::vector<std::string>{"features.1.running_mean", "features.1.running_var", "features.1.num_batches_tracked",
                                 "features.5.running_mean", "features.5.running_var",
                                 "features.5.num_batches_tracked"});
  const at::Tensor x = at::randn({8, 1, 28, 28});
  model->train(true);
  CHECK(model->forward(x).sizes() == at::IntArrayRef({8, 10}));
  const auto buffers = model->named_buffers();
  CHECK(buffers[2].second.item<int64_t>() == 1);
  CHECK(buffers[0].second.abs().sum().item<float>() > 0);  // running mean moved
  model->train(false);
  const at::Tensor a = model->forward(x.narrow(0, 0, 2)), b = model->forward(x).narrow(0, 0, 2);
  CHECK(a.allclose(b, 1e-5, 1e-5));  // eval: per-sample, independent of the batch
  CHECK(buffers[2].second.item<int64_t>() == 1);

  config.batch_norm = false;
  config.channels = {8, 8, 8};
  config.fc_sizes = {32, 16};
  auto plain = build(config, ModelInput{{3, 32, 32}, 7});
  CHECK(names_of(plain->named_buffers()).empty());
  CHECK(names_of(plain->named_parameters()).front() == "features.0.weight");
  CHECK(names_of(plain->named_parameters())[1] == "features.0.bias");
  CHECK(plain->forward(at::randn({2, 3, 32, 32})).sizes() == at::IntArrayRef({2, 7}));
  config.channels = {8, 8, 8, 8, 8, 8};
  CHECK_THROWS_AS(build(config, ModelInput{{1, 28, 28}, 10}), mgtrain::UsageError);
  CHECK_THROWS_AS(build(config_of("cnn"), ModelInput{{784}, 10}), mgtrain::UsageError);
}

TEST_CASE("resnet: CIFAR ResNet shapes and torchvision names") {
  ModelConfig config = config_of("resnet");
  config.resnet_blocks = 1;
  auto model = build(config, ModelInput{{3, 32, 32}, 10});
  const auto names = names_of(model->named_parameters());
  CHECK(names.front() == "conv1.weight");
  CHECK(names[1] == "bn1.weight");
  CHECK(std::find(names.begin(), names.end(), "layer2.0.downsample.0.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "layer1.0.downsample.0.weight") == names.end());
  CHECK(names.back() == "fc.bias");
  CHECK(shapes_of(model->named_parameters()).back() == std::vector<int64_t>{10});
  CHECK(model->forward(at::randn({2, 3, 32, 32})).sizes() == at::IntArrayRef({2, 10}));
  CHECK_THAT(model->summary(), Contains("resnet-8"));
  config.resnet_blocks = 3;  // ResNet-20: 0.27M parameters
  auto resnet20 = build(config, ModelInput{{3, 32, 32}, 10});
  CHECK(mgtrain::parameter_count(*resnet20) == Approx(272474).margin(1000));
}

TEST_CASE("gpt: shapes, names, causality, loss") {
  ModelConfig config = config_of("gpt");
  config.layers = 2;
  config.heads = 2;
  config.d_model = 16;
  config.context_length = 12;
  auto model = build(config, ModelInput{{12}, 50});
  const auto names = names_of(model->named_parameters());
  CHECK(names.front() == "transformer.wte.weight");
  CHECK(names[1] == "transformer.wpe.weight");
  CHECK(names[2] == "transformer.h.0.ln_1.weight");
  CHECK(std::find(names.begin(), names.end(), "transformer.h.1.attn.c_attn.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "transformer.h.1.mlp.c_proj.bias") != names.end());
  CHECK(names.back() == "lm_head.weight");
  CHECK(model->named_buffers().empty());
  model->train(false);

  const at::Tensor tokens = at::randint(50, {3, 12}, at::kLong);
  const at::Tensor logits = model->forward(tokens);
  CHECK(logits.sizes() == at::IntArrayRef({3, 12, 50}));
  // Causality: changing token 7 leaves the logits of positions 0..6 unchanged and changes position 7 onwards.
  at::Tensor changed = tokens.clone();
  changed.select(1, 7).add_(1).remainder_(50);
  const at::Tensor logits2 = model->forward(changed);
  CHECK(logits.narrow(1, 0, 7).equal(logits2.narrow(1, 0, 7)));
  CHECK_FALSE(logits.narrow(1, 7, 1).allclose(logits2.narrow(1, 7, 1)));
  // Shorter inputs work; longer than the context do not.
  CHECK(model->forward(tokens.narrow(1, 0, 5)).sizes() == at::IntArrayRef({3, 5, 50}));
  CHECK_THROWS_AS(model->forward(at::zeros({1, 13}, at::kLong)), mgtrain::UsageError);
  // Loss flattens [B, T, V]; at init it is close to log(V).
  const at::Tensor loss = model->loss(logits, at::randint(50, {3, 12}, at::kLong));
  CHECK(loss.dim() == 0);
  CHECK(loss.item<double>() == Approx(std::log(50.0)).margin(0.3));
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  CHECK(same_parameters(*build(config, ModelInput{{12}, 50}, 3), *build(config, ModelInput{{12}, 50}, 3)));
  config.heads = 3;
  CHECK_THROWS_AS(build(config, ModelInput{{12}, 50}), mgtrain::UsageError);
}

TEST_CASE("torchscript: a scripted module loads, trains and reports its names") {
  ModelConfig config = config_of("torchscript");
  config.path = "/nonexistent/model.pt";
  CHECK_THROWS_WITH(mgtrain::build_model(config, {}), "model.path /nonexistent/model.pt: no such file");
  mgtrain::test::TempDir dir;
  config.path = dir / "garbage.pt";
  mgtrain::test::write_bytes(config.path, {'n', 'o', 't', ' ', 'a', ' ', 'z', 'i', 'p'});
  CHECK_THROWS_WITH(mgtrain::build_model(config, {}), Contains(config.path + ": not a loadable TorchScript module"));

  const std::string why = mgtrain::test::python_torch_unavailable_reason();
  if (!why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  const char* script = R"(
import sys, torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.head = nn.Linear(8, 3)
    def forward(self, x):
        return self.head(self.body(x))
torch.jit.script(Net()).save(sys.argv[1])
)";
  config.path = dir / "net.pt";
  REQUIRE(mgtrain::test::run_reference_python(script, {config.path}));
  auto model = mgtrain::build_model(config, ModelInput{{3, 4}, 3});
  CHECK(names_of(model->named_parameters()) == std::vector<std::string>{"body.1.weight", "body.1.bias", "body.2.weight",
                                                                        "body.2.bias", "head.weight", "head.bias"});
  CHECK(names_of(model->named_buffers()) ==
        std::vector<std::string>{"body.2.running_mean", "body.2.running_var", "body.2.num_batches_tracked"});
  CHECK_THAT(model->summary(), Contains("torchscript"));
  model->train(true);
  const at::Tensor x = at::randn({5, 3, 4});
  const at::Tensor logits = model->forward(x);
  CHECK(logits.sizes() == at::IntArrayRef({5, 3}));
  const at::Tensor loss = model->loss(logits, at::tensor(std::vector<int64_t>{0, 1, 2, 0, 1}, at::kLong));
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().abs().sum().item<float>() > 0);
  }
  CHECK(model->named_buffers()[2].second.item<int64_t>() == 1);
}
