// The worker of a project outside mgtrain's tree (tests/package/consumer), linked only to mgtrain::trainer:
// `--torch-check` uses LibTorch and fmt directly (through the package's include roots, Debian's fmt before a wheel's
// bundled one: the wrong fmt headers would not link against Debian's libfmt), anything else runs mgtrain's trainer.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <cstdio>
#include <string>
#include <vector>

#include "train/loop/worker_main.hpp"
#include "util/log.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--torch-check") {
    const at::Tensor sum = at::ones({2, 3}).sum();
    const std::string line = fmt::format("consumer: torch {}.{} sum {}\n", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                                         fmt::to_string(sum.item<float>()));
    std::fputs(line.c_str(), stdout);
    return 0;
  }
  return mgtrain::log::run_main("my-worker", [&] { return mgtrain::run_worker(args); });
}
