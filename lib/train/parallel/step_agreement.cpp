// The per-step vote (see step_agreement.hpp).
#include "train/parallel/step_agreement.hpp"

#include <ATen/ATen.h>

namespace mgtrain {

void StepAgreement::begin(const StepVotes& mine) {
  votes_ = at::tensor({mine.stop ? 1.0f : 0.0f, mine.save_due ? 1.0f : 0.0f, mine.writer_failed ? 1.0f : 0.0f,
                       mine.save_requested ? 1.0f : 0.0f});
  work_ = comm_.single_process() ? torch_compat::WorkHandle{} : comm_.allreduce_sum_async(votes_);
}

StepVotes StepAgreement::finish() {
  if (work_) {
    const auto wait_start = std::chrono::steady_clock::now();
    work_->wait();
    waited_ += std::chrono::steady_clock::now() - wait_start;
  }
  work_ = {};
  const float* v = votes_.data_ptr<float>();
  return StepVotes{v[0] > 0, v[1] > 0, v[2] > 0, v[3] > 0};
}

}  // namespace mgtrain
