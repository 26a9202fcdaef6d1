// A worker of one's own: a residual MLP written with torch::nn and a data set of its own (points on interleaved
// spirals, one spiral per class), registered with mgtrain and trained by mgtrain's DDP loop, checkpoints, resume and
// metrics included. docs/trainer.md#bring-your-own-model walks through it.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <mgtrain/trainer.hpp>
#include <torch/torch.h>

namespace {

// ---- the model: Linear -> [LayerNorm -> Linear -> GELU -> Linear, added back] x blocks -> Linear -------------------
struct ResidualBlockImpl : torch::nn::Module {
  explicit ResidualBlockImpl(int64_t width, double dropout)
      : norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        fc1(register_module("fc1", torch::nn::Linear(width, 2 * width))),
        fc2(register_module("fc2", torch::nn::Linear(2 * width, width))),
        drop(register_module("drop", torch::nn::Dropout(dropout))) {}
  torch::Tensor forward(const torch::Tensor& x) { return x + drop(fc2(torch::gelu(fc1(norm(x))))); }
  torch::nn::LayerNorm norm;
  torch::nn::Linear fc1, fc2;
  torch::nn::Dropout drop;
};
TORCH_MODULE(ResidualBlock);

struct ResidualMlpImpl : torch::nn::Module {
  ResidualMlpImpl(int64_t inputs, int64_t width, int64_t blocks, double dropout, int64_t classes)
      : stem(register_module("stem", torch::nn::Linear(inputs, width))),
        body(register_module("body", torch::nn::Sequential())),
        head(register_module("head", torch::nn::Linear(width, classes))) {
    for (int64_t i = 0; i < blocks; ++i) body->push_back(ResidualBlock(width, dropout));
  }
  torch::Tensor forward(const torch::Tensor& x) { return head(body->forward(stem(x.flatten(1)))); }
  torch::nn::Linear stem;
  torch::nn::Sequential body;
  torch::nn::Linear head;
};

// ---- the data: `classes` interleaved spirals of 2-d points with Gaussian noise, generated from the seed ----------
class Spirals final : public mgtrain::DataSource {
 public:
  Spirals(int64_t samples, int64_t classes, double noise, uint64_t seed) : classes_(classes) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    targets_ = torch::arange(samples, torch::kLong).remainder(classes);
    const auto t = torch::rand({samples}, gen, torch::kFloat) * 3.0 + 0.25;  // radius and angle along the arm
    const auto angle = t * 2.5 + targets_.to(torch::kFloat) * (2.0 * M_PI / static_cast<double>(classes));
    points_ = torch::stack({t * torch::cos(angle), t * torch::sin(angle)}, 1);
    points_ += torch::randn({samples, 2}, gen, torch::kFloat) * noise;
  }
  int64_t size() const override { return targets_.size(0); }
  std::vector<int64_t> sample_shape() const override { return {2}; }
  int64_t num_classes() const override { return classes_; }
  mgtrain::Batch make_batch(const std::vector<int64_t>& indices) const override {
    return {mgtrain::gather_rows(points_, indices), mgtrain::gather_rows(targets_, indices)};
  }
  std::string description() const override {
    return "spirals: " + std::to_string(size()) + " points, " + std::to_string(classes_) + " classes";
  }

 private:
  int64_t classes_;
  torch::Tensor points_, targets_;
};

}  // namespace

int main(int argc, char** argv) {
  using mgtrain::OptionType;
  mgtrain::register_model(
      {"residual_mlp",
       "an MLP of pre-norm residual blocks",
       {{"width", OptionType::Integer, "64", "hidden width", 1, 65536},
        {"blocks", OptionType::Integer, "3", "residual blocks", 0, 256},
        {"dropout", OptionType::Number, "0", "dropout inside each block", 0, 1}}},
      [](const mgtrain::ModelContext& c) {
        int64_t inputs = 1;
        for (int64_t d : c.input.sample_shape) inputs *= d;
        const int64_t width = c.options.integer("width"), blocks = c.options.integer("blocks");
        auto module = std::make_shared<ResidualMlpImpl>(inputs, width, blocks, c.options.number("dropout"),
                                                        c.input.num_classes);
        return std::make_unique<mgtrain::ModuleModel<ResidualMlpImpl>>(
            module, "residual_mlp width " + std::to_string(width) + ", " + std::to_string(blocks) + " blocks");
      });
  mgtrain::register_data(
      {"spirals",
       "points on interleaved spirals, one per class",
       {{"samples", OptionType::Integer, "20000", "points in the training split (the test split has a fifth)", 10,
         1e8},
        {"classes", OptionType::Integer, "3", "spirals", 2, 64},
        {"noise", OptionType::Number, "0.15", "standard deviation of the Gaussian noise", 0, 10}}},
      [](const mgtrain::DataContext& c) {
        const bool train = c.split == mgtrain::Split::Train;
        const int64_t samples = c.options.integer("samples");
        return std::make_unique<Spirals>(train ? samples : std::max<int64_t>(samples / 5, 1),
                                         c.options.integer("classes"), c.options.number("noise"),
                                         c.seed + (train ? 0 : 1));
      });
  return mgtrain::run_worker(argc, argv);
}
