// mgtrain::run_worker(argc, argv) (see trainer.hpp): the one entry point of every worker binary, mgtrain-worker and
// a user's own. First, when OpenBLAS fell back to its generic kernels on a CPU it does not know, it restarts itself
// with a better OPENBLAS_CORETYPE (train/loop/blas_setup.hpp). `--probe` prints the LibTorch and BLAS facts as JSON
// (for `mgtrain env`); `--describe-plugins` what this worker registers (for the launcher's config check);
// `--export-torchscript` writes a checkpoint's model as TorchScript (for `mgtrain export`); otherwise it loads the
// config and runs the trainer. Errors become one message and a documented exit code.
#include <sys/prctl.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "config/plugin_catalog.hpp"
#include "contract/worker_binary.hpp"
#include "contract/worker_identity.hpp"
#include "contract/worker_variables.hpp"
#include "mgtrain/trainer.hpp"
#include "train/loop/blas_setup.hpp"
#include "train/loop/worker_main.hpp"
#include "train/state/torchscript_export.hpp"
#include "train/torch/torch_facts.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace mgtrain {
namespace {

// LibTorch's errors carry a C++ backtrace of dozens of frames in what(): the message alone, as an mgtrain error, and
// for a GPU out of memory what to change.
Error from_torch_error(const c10::Error& error) {
  std::string message = error.what_without_backtrace();
  if (message.find("out of memory") != std::string::npos) {
    message +=
        " (lower train.batch_size, train in bf16, or raise train.gpu_memory_fraction when it caps the allocator)";
  }
  return Error("LibTorch: " + message);
}

// gloo's own exceptions (not LibTorch's) when a peer went away mid-collective, e.g. "[.../gloo/transport/tcp/pair.cc:
// 598] Connection closed by peer [10.0.0.2]:4711": not an internal error of this worker but the echo of another's.
std::optional<Error> from_peer_failure(const std::exception& error) {
  const std::string what = error.what();
  if (what.find("gloo/transport") == std::string::npos) return std::nullopt;
  return Error("a collective failed: " + what.substr(0, what.find('\n')) +
               ": another rank has probably failed or its node gone (the launcher's report names the root cause)");
}

}  // namespace

int run_worker(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return log::run_main("mgtrain-worker", [&] {
    const bool training =
        args.empty() || (args[0] != "--probe" && args[0] != "--export-torchscript" && args[0] != kDescribePluginsFlag);
    // Rank 0 (or a worker outside any launcher) says what the whole job does.
    const bool first_rank = training && worker_identity_from_environment(current_environment()).rank == 0;
    restart_with_better_blas_core(argv, first_rank);
    // Under a launcher: Yama's ptrace_scope 1 (Ubuntu's default) lets only a process's ancestors read its stacks, and
    // the launcher's eu-stack child is not one: name the launcher as tracer (docs/diagnosis.md). No Yama: a no-op.
    if (std::getenv(kRunDirVariable) != nullptr) prctl(PR_SET_PTRACER, getppid(), 0, 0, 0);
    if (args.size() == 1 && args[0] == "--probe") {
      std::printf("%s\n", probe_json_with_blas(torch_facts_json()).c_str());
      return exit_code::kSuccess;
    }
    if (args.size() == 1 && args[0] == kDescribePluginsFlag) {
      std::fputs(catalog_to_yaml(registered_plugins()).c_str(), stdout);
      return exit_code::kSuccess;
    }
    if (!args.empty() && args[0] == "--export-torchscript") {
      return run_torchscript_export(std::vector<std::string>(args.begin() + 1, args.end()));
    }
    try {
      return run_training_worker(args);
    } catch (const c10::Error& error) {
      throw from_torch_error(error);
    } catch (const std::exception& error) {
      if (std::optional<Error> peer = from_peer_failure(error)) throw *peer;
      throw;
    }
  });
}

}  // namespace mgtrain
