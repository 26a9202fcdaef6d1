// The random generators' states in checkpoints: captured as U8 tensors and set back (see train_state.hpp).
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#ifdef MGTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "train/state/train_state.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain {

NamedTensors capture_rng_state() {
  NamedTensors out;
  {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    out.emplace_back("rng/cpu", cpu.get_state());
  }
#ifdef MGTRAIN_WITH_CUDA
  if (torch::cuda::is_available()) {
    at::Generator cuda = at::cuda::detail::getDefaultCUDAGenerator(c10::cuda::current_device());
    std::lock_guard<std::mutex> lock(cuda.mutex());
    out.emplace_back("rng/cuda", cuda.get_state());
  }
#endif
  return out;
}

namespace {

void set_generator_state(at::Generator generator, const TensorView& view) {
  if (view.dtype != "U8" || view.shape.size() != 1 || view.nbytes != static_cast<size_t>(view.shape[0]) || !view.data) {
    throw UsageError(fmt::format("checkpoint: {} must be a 1-dimensional U8 tensor, but is {} of shape {}", view.name,
                                 view.dtype, shape_text(view.shape)));
  }
  at::Tensor state = tensor_over(view).clone();
  std::lock_guard<std::mutex> lock(generator.mutex());
  try {
    generator.set_state(state);
  } catch (const c10::Error& e) {
    throw UsageError(fmt::format("checkpoint: {} is not a valid generator state for this LibTorch ({} bytes): {}",
                                 view.name, view.nbytes, e.what_without_backtrace()));
  }
}

}  // namespace

void restore_rng_state(const TensorLookup& stored, const std::string& prefix) {
  const TensorView* cpu = stored.find(prefix + "rng/cpu");
  if (!cpu)
    throw UsageError(fmt::format("checkpoint: {}rng/cpu (the CPU random generator's state) is missing", prefix));
  set_generator_state(at::detail::getDefaultCPUGenerator(), *cpu);
#ifdef MGTRAIN_WITH_CUDA
  if (const TensorView* cuda = stored.find(prefix + "rng/cuda"); cuda && torch::cuda::is_available()) {
    set_generator_state(at::cuda::detail::getDefaultCUDAGenerator(c10::cuda::current_device()), *cuda);
  }
#endif
}

}  // namespace mgtrain
