// The worker's flow: config (the launcher's resolved file, or a user file plus overrides when started by
// torchrun, srun or by hand), identity from the environment, then the trainer.
#include "train/loop/worker_main.hpp"

#include <csignal>
#include <cstdio>

#include <fmt/format.h>

#include "config/config_loader.hpp"
#include "contract/slurm_task.hpp"
#include "contract/worker_identity.hpp"
#include "contract/worker_variables.hpp"
#include "train/data/data_registry.hpp"
#include "train/loop/stop_request.hpp"
#include "train/loop/trainer.hpp"
#include "train/models/model_registry.hpp"
#include "train/parallel/communicator.hpp"
#include "train/parallel/device_setup.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "worker_io/heartbeat_writer.hpp"

namespace mgtrain {
namespace {

const char* kUsage = R"(usage: mgtrain-worker [CONFIG.yaml] [KEY=VALUE ...]
       mgtrain-worker --probe
       mgtrain-worker --describe-plugins
       mgtrain-worker --export-torchscript CHECKPOINT OUT [--force]

One training process (one rank). Normally started by `mgtrain launch CONFIG.yaml`, which hands it the
resolved config in MGTRAIN_CONFIG_FILE. It also runs under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, ...),
under srun with one task per rank (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), or alone as world size 1.
--probe prints the LibTorch facts as JSON (used by `mgtrain env`).
--describe-plugins prints the models and data sets this worker registers besides the built-ins, with their
options (YAML; the launcher checks configs against it).
--export-torchscript writes the checkpoint's model as a TorchScript module (used by `mgtrain export`).
)";

ConfigRequest config_request_from_args(const std::vector<std::string>& args) {
  ConfigRequest request;
  for (const auto& arg : args) {
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      throw Error("", exit_code::kSuccess);
    }
    if (arg.find('=') != std::string::npos && arg[0] != '-') {
      request.overrides.push_back(arg);
    } else if (!request.path && arg[0] != '-') {
      request.path = arg;
    } else {
      throw UsageError(fmt::format("unexpected argument '{}'\n{}", arg, kUsage));
    }
  }
  return request;
}

}  // namespace

PluginCatalog registered_plugins() { return PluginCatalog{registered_model_specs(), registered_data_specs()}; }

int run_training_worker(const std::vector<std::string>& args) {
  SaveRequest::install();  // first: SIGUSR2 (save now) during setup must not kill us (stop_request.hpp)
  StopRequestHandler::record_early_warning();  // likewise SIGUSR1 (SLURM's warning): acted on at the first step
  const EnvMap env = current_environment();
  LoadedConfig loaded;
  auto resolved = env.find("MGTRAIN_CONFIG_FILE");
  if (resolved != env.end() && args.size() <= 1) {
    ConfigRequest request;
    request.path = resolved->second;
    LoadOptions options;
    options.resolved = true;
    loaded = load_config(request, env, options);
  } else {
    // Not started by `mgtrain launch`: every rank (and every restart) must agree on the run id, which names the
    // checkpoint directory, so take the launcher's (torchrun) or the job's (SLURM) before inventing one.
    LoadOptions options;
    options.make_run_id = [&env] {
      if (auto id = env.find("TORCHELASTIC_RUN_ID"); id != env.end() && !id->second.empty()) return id->second;
      if (auto job = env.find("SLURM_JOB_ID"); job != env.end() && !job->second.empty())
        return slurm_run_id(job->second);
      return generate_run_id();
    };
    loaded = load_config(config_request_from_args(args), env, options);
  }
  apply_plugin_catalog(loaded, registered_plugins());  // options left out get their defaults
  ignore_file_size_signal();  // a write over RLIMIT_FSIZE fails with EFBIG (reported) instead of killing us
  const WorkerIdentity id = worker_identity_from_environment(env);
  const Config& config = loaded.config;
  // The device first: NCCL starts on the current CUDA device, and the backend follows from the device.
  const DeviceChoice device = choose_training_device(config.train, id);
  if (!device.fallback_warning.empty() && id.rank == 0) log::warn("{}", device.fallback_warning);
  prepare_training_device(device.device, config.train);
  auto comm = connect_communicator(id, config.ddp, resolve_backend(config.ddp.backend, device.device));
  auto heartbeat_path = env.find(kHeartbeatFileVariable);
  HeartbeatWriter heartbeat(heartbeat_path == env.end() ? "" : heartbeat_path->second);
  TrainSummary summary = run_training(config, id, *comm, heartbeat);
  if (comm->rank() == 0) {
    log::write_all(1, summary_json_line(summary) + "\n");  // the machine-readable last line, no prefix
  }
  if (summary.stop_signal) {
    if (comm->rank() == 0) {
      log::info("{}: saved a checkpoint at step {} and stopped; run again to resume (exit {})",
                summary.stop_signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM", summary.steps,
                exit_code::kStoppedAfterCheckpoint);
    }
    return exit_code::kStoppedAfterCheckpoint;
  }
  return exit_code::kSuccess;
}

}  // namespace mgtrain
