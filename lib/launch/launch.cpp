// run_launch: from loaded settings to a finished job — plan, port, run directory, supervisor, report.
#include "launch/launch.hpp"
#include "util/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>

#include "config/config_yaml.hpp"
#include "supervise/console_writer.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/fd.hpp"
#include "supervise/host_probe.hpp"
#include "launch/launch_monitor.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/run_directory.hpp"
#include "observe/run_record.hpp"
#include "slurm/slurm_launch.hpp"
#include "contract/log_layout.hpp"
#include "multinode/hosts_launch.hpp"
#include "multinode/node_agent.hpp"
#include "supervise/supervisor.hpp"
#include "util/worker_binary.hpp"

namespace mgtrain {
namespace {


int choose_first_port(const LaunchPlan& plan, PortProbe& ports) {
  if (plan.picks_port()) return ports.pick_free_port();
  if (!ports.is_free(plan.master_port)) {
    throw UsageError("launch.master_port " + std::to_string(plan.master_port) +
                     " is already in use on this machine (another job, or a leftover process?): choose another "
                     "with --master-port, or --master-port 0 to pick a free one");
  }
  return plan.master_port;
}

// With stdin/stdout/stderr closed, the next pipe would become fd 1 and worker output would go into it.
void ensure_standard_fds_open() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      Fd null_fd(open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY));
      if (null_fd.get() == fd) null_fd.release();  // opened at the lowest free fd, `fd` itself: it stays open
    }
  }
}

}  // namespace

int run_launch(const LaunchRequest& request, const LoadedConfig& loaded) {
  return run_launch(request, loaded, LaunchEnvironment{});
}

int run_launch(const LaunchRequest& request, const LoadedConfig& loaded, const LaunchEnvironment& outside) {
  ensure_standard_fds_open();
  const LaunchConfig& launch = loaded.config.launch;
  // --hosts/--hostfile: start one node agent per host and watch them (docs/multinode.md).
  if (launch.hosts.find_first_not_of(" \t") != std::string::npos || launch.hostfile.find_first_not_of(" \t") != std::string::npos) {
    return run_hosts_launch(request, loaded, outside);
  }
  EnvMap environment = outside.environment ? *outside.environment : current_environment();
  SocketPortProbe socket_ports;
  PortProbe& ports = outside.ports ? *outside.ports : socket_ports;

  HostFacts host = probe_host_facts(environment);
  std::vector<std::string> command = request.command;
  bool builtin_trainer = command.empty();
  // The config path is fixed by the plan's run_dir; the placeholder is replaced below.
  if (builtin_trainer) command = {find_worker_binary(launch.worker), "<config>"};
  LaunchPlan plan = make_launch_plan(launch, command, host, builtin_trainer ? loaded.config.ddp.strategy : "ddp");
  if (!plan.gpu_note.empty()) log::write_all(outside.stderr_fd, plan.gpu_note + "\n");
  // Inside a SLURM job: say what SLURM gave, and whether this is a requeued rerun (docs/slurm.md).
  const SlurmDetection slurm = launch.slurm == "off" ? SlurmDetection{} : detect_slurm(environment);
  const Say say = [&outside](const std::string& line) { log::write_all(outside.stderr_fd, line + "\n"); };
  announce_slurm_launch(slurm, loaded, plan, builtin_trainer, say);
  // Several nodes: this launcher is a node agent that meets the others first (docs/multinode.md).
  if (plan.multi_node()) {
    if (launch.status_port > 0) say("mgtrain: warning: --status-port is not served by multi-node agents yet (docs/monitoring.md); no status API for this job");
    // Run history: static node 0 keeps <log_dir>/<run_id>/run.json for the whole job (docs/monitoring.md).
    std::optional<RunRecorder> job_record;
    if (!plan.dynamic && plan.node_rank == 0) {
      keep_earlier_run_record(plan.run_dir, prepare_run_directory(plan.run_dir));
      job_record.emplace(plan.run_dir, start_run_record(plan.run_id, {plan.hostname}, plan.nnodes, plan.world_size));
    }
    const NodeAgentResult agent = run_node_agent(plan, loaded, builtin_trainer, environment, outside, ports);
    const int code = agent.exit_code;
    if (job_record) {
      const std::string warning = job_record->finish(finished_status(code, code == 128 + SIGINT || code == 128 + SIGTERM ||
                                                                          code == 128 + SIGHUP || code == 128 + SIGQUIT,
                                                                     code == exit_code::kStoppedAfterCheckpoint),
                                                     code, 0);
      if (!warning.empty()) say(warning);
    }
    // Preempted (SIGUSR1, or SIGTERM at a time limit): node 0 requeues the SLURM job once its own workers
    // saved and stopped, since global rank 0 (on node 0) exits 75 only after its checkpoint is written.
    requeue_after_preemption(slurm, launch,
                             {agent.node_rank, agent.workers_saved_and_stopped, false, code == 128 + SIGTERM},
                             say, default_command_runner());
    return code;
  }
  std::string config_file = log_layout::config_file(plan.run_dir);
  if (builtin_trainer) plan.command[1] = config_file;

  int first_port = choose_first_port(plan, ports);

  const std::string archived = prepare_run_directory(plan.run_dir);
  if (!archived.empty()) log::write_all(outside.stderr_fd, "mgtrain: run " + plan.run_id + " was launched before; its logs are kept in " + archived + "\n");
  keep_earlier_run_record(plan.run_dir, archived);
  write_run_file(config_file, config_to_yaml(loaded.config));

  std::string notice = omp_threads_notice(plan, environment);
  if (!notice.empty()) log::write_all(outside.stderr_fd, notice + "\n");

  // Run history: run.json says "running" now and the outcome at the end (docs/monitoring.md#run-history).
  RunRecorder run_record(plan.run_dir, start_run_record(plan.run_id, {plan.hostname}, plan.nnodes, plan.world_size));
  Supervisor supervisor(plan, environment, config_file, ports, first_port, outside.stdout_fd, outside.stderr_fd);
  // GPU health line, resource sampling, status API (docs/monitoring.md): after the supervisor blocked its signals.
  LaunchMonitoring monitoring(supervisor, plan, loaded.config, say);
  SupervisionResult result = supervisor.run();
  const std::string record_warning = run_record.finish(
      finished_status(result.exit_code, result.launcher_signal.has_value(), result.stopped_after_checkpoint && !result.failure),
      result.exit_code, result.attempts);
  if (!record_warning.empty()) log::write_all(outside.stderr_fd, record_warning + "\n");

  if (result.failure) {
    log::write_all(outside.stderr_fd, format_failure_report(*result.failure));
    write_run_file(log_layout::failure_json(plan.run_dir), failure_report_to_json(*result.failure));
  }
  if (result.launcher_signal) {
    log::write_all(outside.stderr_fd, "mgtrain: stopped by " + signal_name(*result.launcher_signal) +
                                       "; all workers of run " + plan.run_id + " have exited (exit code " +
                                       std::to_string(result.exit_code) + ")\n");
  } else if (result.stopped_after_checkpoint && !result.failure) {
    log::write_all(outside.stderr_fd, "mgtrain: the workers of run " + plan.run_id +
                                       " saved a checkpoint and stopped on request; run the same command again to resume "
                                       "(exit code " + std::to_string(result.exit_code) + ")\n");
  }
  // Preempted (SIGUSR1, or SIGTERM at a time limit, and the workers saved and stopped): requeue the SLURM job.
  requeue_after_preemption(slurm, launch,
                           {plan.node_rank, result.stopped_after_checkpoint, result.failure.has_value(),
                            result.launcher_signal == SIGTERM},
                           say, default_command_runner());
  return result.exit_code;
}

}  // namespace mgtrain
