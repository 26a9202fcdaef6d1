// Entry point of `mgtrain-worker`: one process per rank. First, when OpenBLAS fell back to its generic kernels on a
// CPU it does not know, it restarts itself with a better OPENBLAS_CORETYPE (train/loop/blas_setup.hpp).
// `--probe` prints the LibTorch and BLAS facts as JSON
// (for `mgtrain env`); `--export-torchscript` writes a checkpoint's model as TorchScript (for `mgtrain export`);
// otherwise it loads the config and runs the trainer. Errors become one message
// and a documented exit code.
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "contract/worker_identity.hpp"
#include "contract/worker_variables.hpp"
#include "train/loop/blas_setup.hpp"
#include "train/loop/worker_main.hpp"
#include "train/state/torchscript_export.hpp"
#include "train/torch/torch_facts.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return mgtrain::log::run_main("mgtrain-worker", [&] {
    const bool training = args.empty() || (args[0] != "--probe" && args[0] != "--export-torchscript");
    // Rank 0 (or a worker outside any launcher) says what the whole job does.
    const bool first_rank =
        training && mgtrain::worker_identity_from_environment(mgtrain::current_environment()).rank == 0;
    mgtrain::restart_with_better_blas_core(argv, first_rank);
    // Under a launcher: Yama's ptrace_scope 1 (Ubuntu's default) lets only a process's ancestors read its stacks, and
    // the launcher's eu-stack child is not one: name the launcher as tracer (docs/diagnosis.md). No Yama: a no-op.
    if (std::getenv(mgtrain::kRunDirVariable) != nullptr) prctl(PR_SET_PTRACER, getppid(), 0, 0, 0);
    if (args.size() == 1 && args[0] == "--probe") {
      std::printf("%s\n", mgtrain::probe_json_with_blas(mgtrain::torch_facts_json()).c_str());
      return mgtrain::exit_code::kSuccess;
    }
    if (!args.empty() && args[0] == "--export-torchscript") {
      return mgtrain::run_torchscript_export(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    return mgtrain::run_worker(args);
  });
}
