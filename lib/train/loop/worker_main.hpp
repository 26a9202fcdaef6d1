// What `mgtrain-worker CONFIG [KEY=VALUE...]` does: resolve the config and the rank, then train.
#pragma once

#include <string>
#include <vector>

namespace mgtrain {

int run_worker(const std::vector<std::string>& args);

}  // namespace mgtrain
