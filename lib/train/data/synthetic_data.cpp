// Generation of the deterministic synthetic classification data set (see synthetic_data.hpp).
#include "train/data/synthetic_data.hpp"

#include <cmath>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

constexpr double kClassMeanDistance = 6.0;  // in noise standard deviations

class SyntheticData final : public DataSource {
 public:
  SyntheticData(std::string description, at::Tensor inputs, at::Tensor labels, int64_t classes)
      : description_(std::move(description)),
        inputs_(std::move(inputs)),
        labels_(std::move(labels)),
        classes_(classes) {}

  int64_t size() const override { return inputs_.size(0); }
  std::vector<int64_t> sample_shape() const override {
    const auto sizes = inputs_.sizes();
    return std::vector<int64_t>(sizes.begin() + 1, sizes.end());
  }
  int64_t num_classes() const override { return classes_; }
  Batch make_batch(const std::vector<int64_t>& indices) const override {
    return Batch{gather_rows(inputs_, indices), gather_rows(labels_, indices)};
  }
  std::string description() const override { return description_; }

 private:
  std::string description_;
  at::Tensor inputs_;  // float32 [N, ...shape]
  at::Tensor labels_;  // int64 [N]
  int64_t classes_;
};

}  // namespace

std::unique_ptr<DataSource> open_synthetic_data(const std::vector<int64_t>& shape, int64_t classes, int64_t samples,
                                                Split split, uint64_t seed) {
  if (shape.empty()) throw UsageError("synthetic: data.input_shape must have at least one dimension");
  int64_t features = 1;
  for (int64_t d : shape) {
    if (d < 1)
      throw UsageError(fmt::format("synthetic: data.input_shape [{}] has a dimension < 1", fmt::join(shape, ", ")));
    features *= d;
  }
  if (classes < 2) throw UsageError(fmt::format("synthetic: data.num_classes must be at least 2 (got {})", classes));
  if (samples < 1) throw UsageError(fmt::format("synthetic: needs at least one sample (got {})", samples));

  at::Generator means_generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double scale = kClassMeanDistance / std::sqrt(2.0 * static_cast<double>(features));
  const at::Tensor means = at::randn({classes, features}, means_generator, at::kFloat).mul_(scale);

  at::Generator split_generator = at::make_generator<at::CPUGeneratorImpl>(seed + (split == Split::Train ? 1 : 2));
  at::Tensor labels = at::randint(classes, {samples}, split_generator, at::kLong);
  at::Tensor inputs = at::randn({samples, features}, split_generator, at::kFloat);
  inputs.add_(means.index_select(0, labels));
  std::vector<int64_t> full_shape{samples};
  full_shape.insert(full_shape.end(), shape.begin(), shape.end());
  inputs = inputs.view(full_shape);

  std::string description = fmt::format("synthetic ({}): {} samples of {}, {} classes, seed {}", split_name(split),
                                        samples, fmt::join(shape, "x"), classes, seed);
  return std::make_unique<SyntheticData>(std::move(description), std::move(inputs), std::move(labels), classes);
}

}  // namespace mgtrain
