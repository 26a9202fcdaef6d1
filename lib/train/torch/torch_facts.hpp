// What the linked LibTorch offers (version, CUDA, GPUs, NCCL, threads), as JSON for `mgtrain-worker --probe`,
// which `mgtrain env` calls so that the launcher never links LibTorch itself.
#pragma once

#include <string>

namespace mgtrain {

std::string torch_facts_json();

}  // namespace mgtrain
