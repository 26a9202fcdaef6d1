// Entry point of `mgtrain-worker`: one process per rank. First, when OpenBLAS fell back to its generic kernels on a
// CPU it does not know, it restarts itself with a better OPENBLAS_CORETYPE (train/loop/blas_setup.hpp).
// `--probe` prints the LibTorch and BLAS facts as JSON
// (for `mgtrain env`); `--export-torchscript` writes a checkpoint's model as TorchScript (for `mgtrain export`);
// otherwise it loads the config and runs the trainer. Errors become one message
// and a documented exit code.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "util/error.hpp"
#include "util/log.hpp"
#include "train/torch/torch_facts.hpp"
#include "train/state/torchscript_export.hpp"
#include "train/loop/blas_setup.hpp"
#include "train/loop/worker_main.hpp"

namespace {

// The job's first rank (or a worker outside any launcher): the one that says what the whole job does.
bool first_rank() {
  for (const char* name : {"RANK", "SLURM_PROCID"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::string(value) != "0") return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const bool training = args.empty() || (args[0] != "--probe" && args[0] != "--export-torchscript");
    mgtrain::restart_with_better_blas_core(argv, training && first_rank());
    if (args.size() == 1 && args[0] == "--probe") {
      std::printf("%s\n", mgtrain::probe_json_with_blas(mgtrain::torch_facts_json()).c_str());
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
