// Entry point of `mgtrain-worker`: one process per rank. `--probe` prints the LibTorch facts as JSON
// (for `mgtrain env`); `--export-torchscript` writes a checkpoint's model as TorchScript (for `mgtrain export`);
// otherwise it loads the config and runs the trainer. Errors become one message
// and a documented exit code.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/log.hpp"
#include "train/torch/torch_facts.hpp"
#include "train/state/torchscript_export.hpp"
#include "train/loop/worker_main.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 1 && args[0] == "--probe") {
      std::printf("%s\n", mgtrain::torch_facts_json().c_str());
      return mgtrain::exit_code::kSuccess;
    }
    if (!args.empty() && args[0] == "--export-torchscript") {
      return mgtrain::run_torchscript_export(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    return mgtrain::run_worker(args);
  } catch (const mgtrain::Error& e) {
    mgtrain::log::fatal("mgtrain-worker", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    mgtrain::log::fatal("mgtrain-worker", e.what(), /*internal=*/true);
    return mgtrain::exit_code::kFailure;
  }
}
