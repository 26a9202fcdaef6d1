// run_launch: from loaded settings to a finished job — plan, port, run directory, supervisor, report.
#include "launch/launch.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>

#include "config/config_yaml.hpp"
#include "contract/log_layout.hpp"
#include "contract/worker_binary.hpp"
#include "elastic/file_timer_pipe.hpp"
#include "hosts/hosts_launch.hpp"
#include "launch/host_probe.hpp"
#include "launch/job_record.hpp"
#include "launch/launch_monitor.hpp"
#include "launch/python_interpreter.hpp"
#include "launch/python_script.hpp"
#include "launch/rank_diagnostics.hpp"
#include "launch/rendezvous_secret.hpp"
#include "launch/run_directory_lock.hpp"
#include "launch/termination_message.hpp"
#include "launch/torchrun_personality.hpp"
#include "multinode/node_agent.hpp"
#include "observe/run_record.hpp"
#include "output/console_writer.hpp"
#include "output/duplicate_filter.hpp"
#include "output/file_tail.hpp"
#include "output/line_prefix.hpp"
#include "slurm/slurm_launch.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/run_directory.hpp"
#include "supervise/supervision_policy.hpp"
#include "supervise/supervisor.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/fd.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"
#include "util/time_format.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

// The workers' store port of attempt 0, reserved by `ports` for as long as the probe lives (port_probe.hpp): a port
// another mgtrain launch on this host reserved is refused even while it is free at TCP level, since that launch's
// rank 0 is about to bind it (and this job's other ranks could meet the wrong job's store).
int choose_first_port(const LaunchPlan& plan, PortProbe& ports) {
  if (plan.picks_port()) return ports.pick_free_port();
  const std::string port = std::to_string(plan.master_port);
  switch (ports.claim(plan.master_port)) {
    case PortClaim::kTaken:
      return plan.master_port;
    case PortClaim::kInUse:
      throw UsageError("launch.master_port " + port +
                       " is already in use on this machine (another job, or a leftover process?): choose another "
                       "with --master-port, or --master-port 0 to pick a free one");
    case PortClaim::kReservedByMgtrain:
      break;
  }
  throw UsageError("launch.master_port " + port +
                   " is reserved by another mgtrain launch on this machine, whose workers' store uses it: choose "
                   "another with --master-port, or --master-port 0 to pick a free one");
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

// A line from a helper that words it whole, "mgtrain: ..." (no newline): the GPU choice, a run record warning.
void say_line(const std::string& line) { log::text(line + "\n"); }

// `mgtrain launch` names its run and folder when it starts and when it ends (docs/launch.md#run-id); the torchrun
// personality does not, its console is torchrun's.
void announce_run_start(const LaunchPlan& plan) {
  if (plan.personality != Personality::Torchrun) log::info("run {}: logs in {}", plan.run_id, plan.run_dir);
}
void announce_run_end(const LaunchPlan& plan, const std::string& status, int exit_code) {
  if (plan.personality != Personality::Torchrun) {
    log::info("run {} {} (exit code {}): logs in {}", plan.run_id, status, exit_code, plan.run_dir);
  }
}

// The plan for this node: the program after `--`, or the built-in trainer, which gets the run's
// config file (worker_command) once the run directory is known.
LaunchPlan plan_for(const LaunchRequest& request, const LoadedConfig& loaded, const HostFacts& host) {
  const LaunchConfig& launch = loaded.config.launch;
  const bool builtin_trainer = request.command.empty();
  const std::vector<std::string> command =
      builtin_trainer ? std::vector<std::string>{find_worker_binary(launch.worker)} : request.command;
  LaunchPlan plan = make_launch_plan(
      launch, command, host, builtin_trainer ? loaded.config.ddp.strategy : Strategy::Ddp, request.config.personality);
  plan.builtin_trainer = builtin_trainer;
  return plan;
}

// The console's prefix template and torchrun's duplicate filters, as torchrun reads them: the flag (or its PET_
// variable), else the launcher's environment. Kept in the plan: nothing is added to the workers' environment.
void set_console_settings(LaunchPlan& plan, const LaunchRequest& request, const EnvMap& environment) {
  plan.line_prefix = request.log_line_prefix_template
                         ? LinePrefix::from_setting(request.log_line_prefix_template, "--log-line-prefix-template")
                         : LinePrefix::from_setting(environment_value(environment, kLogLinePrefixTemplateVariable),
                                                    std::string(kLogLinePrefixTemplateVariable) + " (environment)");
  const std::optional<std::string>* flags[2] = {&request.duplicate_stdout_filters, &request.duplicate_stderr_filters};
  const char* variables[2] = {kDuplicateStdoutFiltersVariable, kDuplicateStderrFiltersVariable};
  for (int stream = 0; stream < 2; ++stream) {
    const std::optional<std::string> text =
        *flags[stream] ? *flags[stream] : environment_value(environment, variables[stream]);
    if (text) plan.duplicate_filters[stream] = parse_duplicate_filters(*text);
  }
}

// A node agent's monitoring (docs/monitoring.md#several-nodes): every node reports its ranks to the agent that hosts
// the rendezvous, which serves the job-wide status API when launch.status_port is set and judges every rank of the job
// for stragglers. The other nodes serve their own ranks' view (naming the job's host), its files in their node folder.
// Each node samples its own ranks into its node directory's resources.jsonl.
std::shared_ptr<void> start_node_monitoring(Supervisor& supervisor, NodeAgent& agent, const LaunchPlan& plan,
                                            const Config& job_config, RankDiagnostics& diagnostics,
                                            StragglerEpisodesSink on_episodes, std::function<void()> tick) {
  Config config = job_config;
  if (!agent.hosts_rendezvous()) {
    config.launch.straggler_detection = false;  // the host judges every rank of the job
    if (config.launch.status_port > 0) {
      log::info(
          "the job's status API is served by the node that hosts the rendezvous ({}); this node reports its "
          "ranks there and serves its own ranks' view",
          agent.rendezvous_endpoint());
    }
  } else if (config.launch.status_port > 0) {
    std::filesystem::create_directories(plan.run_dir);  // a dynamic host's run folder, for status_token
  }
  JobStatusLink link;
  link.report = [&agent](rdzv::NodeStatus status) { agent.report_status(std::move(status)); };
  link.nodes = [&agent] { return agent.job_status(); };
  link.hosts = [&agent] { return agent.hosts_rendezvous(); };
  link.job_status_host = [&agent] { return agent.rendezvous_endpoint(); };
  link.tick = std::move(tick);
  link.last_recovery = [&agent]() -> std::optional<std::pair<int, RoundEntry::Recovery>> {
    const std::vector<RoundEntry> rounds = round_entries(agent.job_rounds());
    for (auto round = rounds.rbegin(); round != rounds.rend(); ++round) {
      if (round->recovery && round->recovery->first_step_s) return std::make_pair(round->round, *round->recovery);
    }
    return std::nullopt;
  };
  link.serve_stacks = [&agent](JobStatusLink::NodeStacksDumper dumper) { agent.set_stacks_dumper(std::move(dumper)); };
  link.start_job_stacks = [&agent](double timeout_s) { return agent.start_job_stacks(timeout_s); };
  link.take_job_stacks = [&agent] { return agent.take_job_stacks(); };
  RunRecordSinks sinks;
  sinks.episodes = std::move(on_episodes);
  return std::make_shared<LaunchMonitoring>(supervisor, plan, config, diagnostics, std::move(sinks), std::move(link));
}

// Several nodes: this launcher is a node agent that meets the others first (docs/multinode.md).
int run_multi_node(const LaunchPlan& plan, const LoadedConfig& loaded, const SlurmDetection& slurm,
                   const EnvMap& environment, const LaunchEnvironment& outside, PortProbe& ports,
                   const std::optional<std::string>& flag_token) {
  const LaunchConfig& launch = loaded.config.launch;
  // Run history: static node 0 keeps <log_dir>/<run_id>/run.json for the whole job (docs/monitoring.md), and holds
  // the run folder's lock: the other nodes of the job share the folder (node_<k>/ each) and take no lock.
  std::optional<RunDirectoryLock> run_lock;
  std::optional<RunRecorder> job_record;
  if (!plan.dynamic && plan.node_rank == 0) {
    run_lock.emplace(plan.run_dir, plan.run_id, plan.hostname);
    keep_earlier_run_record(plan.run_dir, prepare_run_directory(plan.run_dir));
    announce_run_start(plan);
    job_record.emplace(plan.run_dir, start_run_record(plan.run_id, {plan.hostname}, plan.nnodes, plan.world_size));
  }
  RankDiagnostics diagnostics;  // this node's ranks' stacks when a hang is found (docs/diagnosis.md)
  JobRecord rounds_record(plan, job_record);
  NodeAgentOutside agent_outside{outside.stdout_fd,
                                 outside.stderr_fd,
                                 outside.reload_with_run_id,
                                 rendezvous_token(launch, flag_token, environment, slurm.job_id),
                                 &diagnostics,
                                 {}};
  agent_outside.monitoring = [&](Supervisor& supervisor, NodeAgent& node) -> std::shared_ptr<void> {
    StragglerEpisodesSink episodes;  // into the job's run.json, where this node keeps it
    if (job_record) {
      episodes = [&job_record](std::vector<StragglerRecord> records) {
        const std::string warning = job_record->set_stragglers(std::move(records));
        if (!warning.empty()) say_line(warning);
      };
    }
    auto tick = [&rounds_record, &node] {
      if (!node.hosts_rendezvous()) return;
      rounds_record.note_replication(node.job_status());
      rounds_record.update(node.job_rounds(), node.job_run_id());
    };
    return start_node_monitoring(supervisor, node, plan, loaded.config, diagnostics, std::move(episodes), tick);
  };
  const NodeAgentResult agent = run_node_agent(plan, loaded, environment, agent_outside, ports);
  const int code = agent.exit_code;
  if (agent.failure) {
    write_launcher_error_file(*agent.failure, environment, plan.personality);
    write_termination_message(*agent.failure, launch.termination_log, plan.personality);
  }
  rounds_record.update(agent.job_rounds, agent.job_run_id);  // the last round's end
  rounds_record.write_replication();
  if (job_record) {
    const std::string status = finished_status(code, agent.launcher_signal.has_value() || stopped_by_signal(code),
                                               code == exit_code::kStoppedAfterCheckpoint);
    const std::string warning = job_record->finish(status, code, static_cast<int>(agent.job_rounds.size()));
    if (!warning.empty()) say_line(warning);
    announce_run_end(plan, status, code);
  }
  // Preempted (SIGUSR1, or SIGTERM at a time limit): node 0 requeues the SLURM job once its own workers
  // saved and stopped, since global rank 0 (on node 0) exits 75 only after its checkpoint is written. After SIGTERM
  // (to this agent, or to another node, whose 143 ended the job) the job's state tells a time limit from scancel.
  const bool after_sigterm = agent.launcher_signal == SIGTERM || code == stopped_exit_code(SIGTERM);
  requeue_after_preemption(slurm, launch, {agent.node_rank, agent.workers_saved_and_stopped, false, after_sigterm},
                           default_command_runner());
  return code;
}

// After a single-node run: the failure report and failure.json, or why the workers stopped.
void report_single_node_end(const LaunchPlan& plan, SupervisionResult& result, const EnvMap& environment,
                            const LaunchConfig& launch) {
  if (result.failure) {
    log::text(format_failure_report(*result.failure));
    write_run_file(log_layout::failure_json(plan.run_dir), failure_report_to_json(*result.failure));
    write_launcher_error_file(*result.failure, environment, plan.personality);
    write_termination_message(*result.failure, launch.termination_log, plan.personality);
  }
  const SignalResponse response = result.launcher_signal
                                      ? signal_response(*result.launcher_signal, plan.personality, plan.handled_signals)
                                      : SignalResponse::kForward;
  if (plan.personality == Personality::Torchrun && response == SignalResponse::kStop) {
    write_torchrun_exception_file(torchrun_signal_exception_text(*result.launcher_signal), environment);
  }
  if (response == SignalResponse::kStopAndDie && result.stopped_by_file_timer) {
    log::info(
        "a worker's file timer expired and it was sent {}; all workers of run {} have exited; the launcher ends by {} "
        "as torchrun does (torch's FileTimerServer sends the timer's signal to torchrun too)",
        signal_name(*result.launcher_signal), plan.run_id, signal_name(*result.launcher_signal));
  } else if (response == SignalResponse::kStopAndDie) {
    log::info(
        "stopped by {}; all workers of run {} have exited; the launcher ends by {} as torchrun does (a signal "
        "outside --signals-to-handle)",
        signal_name(*result.launcher_signal), plan.run_id, signal_name(*result.launcher_signal));
  } else if (result.launcher_signal && plan.personality == Personality::Mgtrain &&
             result.exit_code == exit_code::kStoppedAfterCheckpoint) {
    log::info(
        "stopped by {}; the workers of run {} saved a checkpoint and stopped; run the same command again to resume "
        "(exit code {})",
        signal_name(*result.launcher_signal), plan.run_id, result.exit_code);
  } else if (result.launcher_signal) {
    log::info("stopped by {}; all workers of run {} have exited (exit code {})", signal_name(*result.launcher_signal),
              plan.run_id, plan.personality == Personality::Torchrun ? exit_code::kFailure : result.exit_code);
  } else if (result.stopped_after_checkpoint && !result.failure) {
    log::info(
        "the workers of run {} saved a checkpoint and stopped on request; run the same command again to resume "
        "(exit code {})",
        plan.run_id, result.exit_code);
  }
}

// One node: the workers under the supervisor, with run record, monitoring and the report at the end.
int run_single_node(const LaunchPlan& plan, const LoadedConfig& loaded, const SlurmDetection& slurm,
                    const EnvMap& environment, const LaunchEnvironment& outside, PortProbe& ports) {
  const std::string config_file = log_layout::config_file(plan.run_dir);
  // The run folder is this launcher's while it lives: a live launcher of the same run id refuses this launch here,
  // before anything of its run is touched (docs/launch.md#run-id).
  const RunDirectoryLock run_lock(plan.run_dir, plan.run_id, plan.hostname);
  const int first_port = choose_first_port(plan, ports);

  const std::string archived = prepare_run_directory(plan.run_dir);
  announce_run_start(plan);
  if (!archived.empty()) log::info("run {} was launched before; its logs are kept in {}", plan.run_id, archived);
  keep_earlier_run_record(plan.run_dir, archived);
  write_run_file(config_file, config_to_yaml(loaded.config));

  const std::string notice = choose_worker_threads(plan, environment).notice;
  if (!notice.empty()) log::info("{}", notice);

  // Run history: run.json says "running" now and the outcome at the end (docs/monitoring.md#run-history).
  RunRecorder run_record(plan.run_dir, start_run_record(plan.run_id, {plan.hostname}, plan.nnodes, plan.world_size));
  RankDiagnostics diagnostics;  // the ranks' stacks when a hang is found (docs/diagnosis.md); outlives the supervisor
  Supervisor supervisor(plan, environment, config_file, ports, first_port, outside.stdout_fd, outside.stderr_fd);
  supervisor.set_diagnostics(diagnostics);
  // GPU health line, resource sampling, status API (docs/monitoring.md): after the supervisor blocked its signals.
  // Straggler episodes go into run.json as they start and end.
  RunRecordSinks sinks;
  sinks.episodes = [&run_record](std::vector<StragglerRecord> episodes) {
    const std::string warning = run_record.set_stragglers(std::move(episodes));
    if (!warning.empty()) say_line(warning);
  };
  sinks.resumes = [&run_record](std::vector<ResumeRecord> resumes) {  // where each restart started
    const std::string warning = run_record.set_resumes(std::move(resumes));
    if (!warning.empty()) say_line(warning);
  };
  LaunchMonitoring monitoring(supervisor, plan, loaded.config, diagnostics, std::move(sinks));
  SupervisionResult result = supervisor.run();
  monitoring.flush_records();
  const std::string status = finished_status(result.exit_code, result.launcher_signal.has_value(),
                                             result.stopped_after_checkpoint && !result.failure);
  const std::string record_warning = run_record.finish(status, result.exit_code, result.attempts);
  if (!record_warning.empty()) say_line(record_warning);
  report_single_node_end(plan, result, environment, loaded.config.launch);
  // Preempted (SIGUSR1, or SIGTERM at a time limit, and the workers saved and stopped): requeue the SLURM job.
  requeue_after_preemption(
      slurm, loaded.config.launch,
      {plan.node_rank, result.stopped_after_checkpoint, result.failure.has_value(), result.launcher_signal == SIGTERM},
      default_command_runner());
  announce_run_end(plan, status, result.exit_code);
  // Torchrun personality, a signal torchrun does not handle: it would have died by it (workers are stopped here).
  if (result.launcher_signal &&
      signal_response(*result.launcher_signal, plan.personality, plan.handled_signals) == SignalResponse::kStopAndDie) {
    die_by_signal(*result.launcher_signal);
  }
  return result.exit_code;
}

// torchrun keeps its logs under the system temp directory; mgtrain's default is ./runs. When that default is in
// use and neither ./runs nor the current directory is writable, runs go to $TMPDIR (or /tmp)/mgtrain-<user>/runs,
// and checkpoint.dir with them when it is its default.
LoadedConfig with_writable_log_dir(const LoadedConfig& loaded, const EnvMap& environment) {
  if (!loaded.is_default("launch.log_dir")) return loaded;
  const std::string& log_dir = loaded.config.launch.log_dir;
  if (log_dir.empty() || log_dir.front() == '/' || access(log_dir.c_str(), W_OK) == 0 || access(".", W_OK) == 0) {
    return loaded;
  }
  LoadedConfig adjusted = loaded;
  const std::string fallback = log_layout::temp_log_dir(environment);
  adjusted.config.launch.log_dir = fallback;
  std::string& checkpoints = adjusted.config.checkpoint.dir;
  if (loaded.is_default("checkpoint.dir") && starts_with(checkpoints, log_dir + "/")) {
    checkpoints = fallback + checkpoints.substr(log_dir.size());
  }
  log::note("the current directory is not writable: logs go to {} (choose another place with --log-dir)", fallback);
  return adjusted;
}

// `mgtrain launch train.py` / `-m module`: the command with its interpreter in front (launch_plan's python facts
// are filled from the same choice). Agents started by --hosts resolve the interpreter on their own host.
LaunchRequest with_interpreter(const LaunchRequest& request, const PythonInterpreter& python, bool resolve) {
  if (!request.run_under_python) return request;
  if (resolve && python.path.empty()) {
    throw UsageError("cannot find the Python interpreter \"" + python.command + "\" (chosen by " + python.source +
                     "): give one with --python PATH, PYTHON_EXEC=PATH or launch.python");
  }
  LaunchRequest prefixed = request;
  prefixed.command.insert(prefixed.command.begin(), resolve ? python.path : python.command);
  prefixed.run_under_python = false;
  return prefixed;
}

}  // namespace

int run_launch(const LaunchRequest& request, const LoadedConfig& loaded) {
  return run_launch(request, loaded, LaunchEnvironment{});
}

int run_launch(const LaunchRequest& original_request, const LoadedConfig& original, const LaunchEnvironment& outside) {
  ensure_standard_fds_open();
  log::ScopedOutput output(outside.stdout_fd, outside.stderr_fd);
  const EnvMap environment = outside.environment ? *outside.environment : current_environment();
  const PythonInterpreter python =
      choose_python(original.config.launch.python, original.origin_of("launch.python"), environment);
  // --hosts/--hostfile: start one node agent per host and watch them (docs/multinode.md).
  if (!original.config.launch.hosts.empty() || !trim(original.config.launch.hostfile).empty()) {
    // The agents authenticate their rendezvous with the user's token, or with one made for this job.
    rdzv::RendezvousToken token =
        rendezvous_token(original.config.launch, original_request.rdzv_token, environment, "");
    if (!token.set()) token = {rdzv::random_hex(32), "this --hosts launch"};
    return run_hosts_launch(with_interpreter(original_request, python, false), original, environment, outside.stdout_fd,
                            outside.stderr_fd, token);
  }
  const LaunchRequest request = with_interpreter(original_request, python, true);
  const HostFacts host = probe_host_facts(environment);
  // `python3 trian.py`: every rank would fail with Python's "can't open file"; the torchrun personality leaves that
  // to the workers, as torchrun does.
  if (original_request.config.personality == Personality::Mgtrain) {
    check_python_script(request.command, original_request.run_under_python, host.cwd);
  }
  const LoadedConfig loaded = original_request.config.personality == Personality::Torchrun
                                  ? with_torchrun_log_dir(original, environment)
                                  : with_writable_log_dir(original, environment);
  const LaunchConfig& launch = loaded.config.launch;
  SocketPortProbe socket_ports;
  PortProbe& ports = outside.ports ? *outside.ports : socket_ports;

  LaunchPlan plan = plan_for(request, loaded, host);
  if (original_request.run_under_python) {
    plan.python = python.path;
    plan.python_source = python.source;
  }
  set_console_settings(plan, original_request, environment);
  // torch's file timer, when the environment enables it as torchrun's agent reads it (docs/launch.md).
  plan.timer_file = file_timer_path(environment, plan.run_id);
  if (!plan.gpu_note.empty()) say_line(plan.gpu_note);
  // Inside a SLURM job: say what SLURM gave, and whether this is a requeued rerun (docs/slurm.md).
  const SlurmDetection slurm = launch.slurm == SlurmMode::Off ? SlurmDetection{} : detect_slurm(environment);
  announce_slurm_launch(slurm, loaded, plan, plan.builtin_trainer);
  if (plan.multi_node()) {
    return run_multi_node(plan, loaded, slurm, environment, outside, ports, original_request.rdzv_token);
  }
  return run_single_node(plan, loaded, slurm, environment, outside, ports);
}

}  // namespace mgtrain
