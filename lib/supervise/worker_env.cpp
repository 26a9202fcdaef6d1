// Builds each worker's environment and command line.
#include "supervise/worker_env.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "contract/console_progress.hpp"
#include "contract/log_layout.hpp"
#include "contract/worker_variables.hpp"
#include "diagnose/rank_diagnosis.hpp"
#include "util/exit_status.hpp"

namespace mgtrain {

EnvMap build_worker_environment(const LaunchPlan& plan, const WorkerSlot& slot, const EnvMap& parent) {
  EnvMap env = parent;
  int global_rank = plan.global_rank(slot.local_rank);
  std::string rank_directory = log_layout::rank_dir(plan.run_dir, slot.attempt, global_rank);

  env["LOCAL_RANK"] = plan.virtual_local_rank ? "0" : std::to_string(slot.local_rank);
  env["RANK"] = std::to_string(global_rank);
  env["GROUP_RANK"] = std::to_string(plan.node_rank);
  env["ROLE_RANK"] = std::to_string(plan.role_rank(slot.local_rank));
  env["ROLE_NAME"] = plan.role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(plan.nproc);
  env["WORLD_SIZE"] = std::to_string(plan.world_size);
  env["GROUP_WORLD_SIZE"] = std::to_string(plan.nnodes);
  env["ROLE_WORLD_SIZE"] = std::to_string(plan.role_size());
  env["MASTER_ADDR"] = plan.master_addr;
  env["MASTER_PORT"] = std::to_string(slot.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(plan.restart_count >= 0 ? plan.restart_count : slot.attempt);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(plan.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = plan.run_id;
  env["TORCHELASTIC_ERROR_FILE"] = log_layout::error_file(rank_directory);
  // torch's agent says whether it hosts the workers' TCPStore at MASTER_ADDR:MASTER_PORT ("True": every rank
  // connects as a client). mgtrain's launcher hosts no store: global rank 0 does, as torch expects with "False".
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  // torchrun's default; the parent's value wins. The old spelling is for torch before 2.2.
  env.emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  env.emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  // torchrun's --signals-to-handle (its default for `mgtrain launch`), as torchrun's launcher exports it.
  env["TORCHELASTIC_SIGNALS_TO_HANDLE"] =
      plan.personality == Personality::Torchrun ? SignalList{plan.handled_signals}.text() : SignalList::kDefaultText;
  if (!plan.timer_file.empty()) env["TORCHELASTIC_TIMER_FILE"] = plan.timer_file;
  if (const WorkerThreads threads = choose_worker_threads(plan, parent); threads.omp_num_threads)
    env["OMP_NUM_THREADS"] = std::to_string(*threads.omp_num_threads);
  if (!plan.gpu_for_local_rank.empty()) env["CUDA_VISIBLE_DEVICES"] = plan.gpu_for_local_rank.at(slot.local_rank);

  env[kRunDirVariable] = plan.run_dir;
  env.erase(kRendezvousTokenVariable);  // the agents' secret: no worker needs it
  env.erase(kConsoleIsTtyVariable);     // a launcher above us spoke of its console, not ours
  env.erase(kConsoleColumnsVariable);
  if (slot.stdout_to_console) {
    env[kConsoleIsTtyVariable] = slot.console_columns > 0 ? "1" : "0";
    if (slot.console_columns > 0) env[kConsoleColumnsVariable] = std::to_string(slot.console_columns);
  }
  if (!slot.config_file.empty()) env[kConfigFileVariable] = slot.config_file;
  if (slot.snapshot_fd >= 0)
    env[kSnapshotFdVariable] = std::to_string(slot.snapshot_fd);
  else
    env.erase(kSnapshotFdVariable);  // a launcher above us handed its worker (us) that descriptor, not ours
  if (!slot.snapshot_replicas.empty())
    env[kSnapshotReplicasVariable] = slot.snapshot_replicas;
  else
    env.erase(kSnapshotReplicasVariable);
  if (workers_get_progress_file(plan)) {
    env[kHeartbeatFileVariable] = log_layout::heartbeat_file(rank_directory);
    // Stacks on demand or before a hung job is stopped: the Python hook and NCCL's flight recorder.
    const EnvMap added =
        diagnose::diagnostics_environment(env, log_layout::python_hook_dir(plan.run_dir), rank_directory);
    for (const auto& [name, value] : added) env[name] = value;
  } else {
    env.erase(kHeartbeatFileVariable);  // a launcher above us must not watch our workers' files
  }
  return env;
}

bool workers_get_progress_file(const LaunchPlan& plan) { return plan.hang_timeout_s > 0 || plan.status_server; }

WorkerThreads choose_worker_threads(const LaunchPlan& plan, const EnvMap& parent) {
  if (plan.threads_per_worker > 0) return {plan.threads_per_worker, ""};  // the user's choice: nothing to say
  if (parent.count("OMP_NUM_THREADS") != 0) return {};
  if (plan.personality == Personality::Torchrun) {
    if (plan.nproc <= 1) return {};
    return {1, fmt::format("setting OMP_NUM_THREADS=1 for each of the {} workers to avoid overloading the machine; "
                           "set OMP_NUM_THREADS yourself to tune it",
                           plan.nproc)};
  }
  const int sharing = std::max(plan.workers_sharing_cpus > 0 ? plan.workers_sharing_cpus : plan.nproc, 1);
  const int threads = std::max(plan.cpus.usable() / sharing, 1);
  const std::string who =
      sharing == plan.nproc
          ? fmt::format("{} worker{}", sharing, sharing == 1 ? "" : "s")
          : fmt::format("{} workers ({} on this node, the others on nodes on the same CPUs)", sharing, plan.nproc);
  return {threads, fmt::format("setting OMP_NUM_THREADS={} for {} worker{}: {} shared by {}; set OMP_NUM_THREADS or "
                               "--threads-per-worker to choose",
                               threads, plan.nproc == 1 ? "the" : fmt::format("each of the {}", plan.nproc),
                               plan.nproc == 1 ? "" : "s", plan.cpus.describe(), who)};
}

std::vector<std::string> worker_command(const LaunchPlan& plan, const std::string& config_file) {
  std::vector<std::string> command = plan.command;
  if (plan.builtin_trainer) command.push_back(config_file);
  return command;
}

std::vector<std::string> expand_worker_command(const std::vector<std::string>& command, int local_rank) {
  static const std::string kPlaceholder = "${local_rank}";
  std::string rank = std::to_string(local_rank);
  std::vector<std::string> expanded = command;
  for (std::string& argument : expanded) {
    for (std::size_t at = argument.find(kPlaceholder); at != std::string::npos;
         at = argument.find(kPlaceholder, at + rank.size())) {
      argument.replace(at, kPlaceholder.size(), rank);
    }
  }
  return expanded;
}

}  // namespace mgtrain
