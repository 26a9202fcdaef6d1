// Collects the LibTorch facts for `mgtrain-worker --probe` (see torch_facts.hpp).
#include "train/torch/torch_facts.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "train/torch/torch_compat.hpp"
#include "util/json_text.hpp"

#ifdef MGTRAIN_WITH_CUDA
// LibTorch's own accessors (its CUDA runtime and the NCCL it was built with), not the toolkit's headers.
#include <ATen/cuda/CUDAContextLight.h>
#include <torch/csrc/cuda/nccl.h>
#endif

namespace mgtrain {

std::string torch_facts_json() {
  const bool cuda = torch::cuda::is_available();
  const long gpus = cuda ? static_cast<long>(torch::cuda::device_count()) : 0;
  std::string devices = "[";
#ifdef MGTRAIN_WITH_CUDA
  for (long i = 0; i < gpus; ++i) {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    devices += fmt::format("{}{{\"index\": {}, \"name\": {}, \"memory_mib\": {}}}", i ? ", " : "", i,
                           json_string(prop->name), prop->totalGlobalMem >> 20);
  }
  // The NCCL LibTorch was built with, encoded as major << 32 | minor << 16 | patch (as torch.cuda.nccl.version()).
  const std::uint64_t nccl_code = torch::cuda::nccl::version();
  const std::string nccl =
      json_string(fmt::format("{}.{}.{}", nccl_code >> 32, (nccl_code >> 16) & 0xffff, nccl_code & 0xffff));
  const bool built_with_cuda = true;
#else
  const std::string nccl = "null";
  const bool built_with_cuda = false;
#endif
  devices += "]";
  return fmt::format(
      "{{\"libtorch_version\": {}, \"built_with_cuda\": {}, \"cuda_available\": {}, \"gpu_count\": {}, \"gpus\": {}, "
      "\"nccl_version\": {}, \"gloo\": true, \"intra_op_threads\": {}}}",
      json_string(torch_compat::kTorchVersion), built_with_cuda ? "true" : "false", cuda ? "true" : "false", gpus,
      devices, nccl, at::get_num_threads());
}

}  // namespace mgtrain
