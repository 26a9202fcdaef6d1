// SLURM detection from the environment (the layouts, each value with its variable), how `mgtrain launch`'s
// config takes it (explicit settings win), the one-line summary, the rerun note and the requeue decision
// and its scontrol calls through a fake runner. The environments are the ones a real slurmd 22.05 gives.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "config/config_loader.hpp"
#include "contract/worker_identity.hpp"
#include "slurm/slurm_environment.hpp"
#include "slurm/slurm_launch.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/log.hpp"

using namespace mgtrain;

namespace {

// Node 1 of `srun --ntasks-per-node=1` in a 2-node job 4242 (what slurmd sets, abridged).
EnvMap step_on_node1() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_JOBID", "4242"},
          {"SLURM_JOB_NODELIST", "node[07-08]"},
          {"SLURM_JOB_NUM_NODES", "2"},
          {"SLURM_NNODES", "2"},
          {"SLURM_NODEID", "1"},
          {"SLURM_NTASKS", "2"},
          {"SLURM_PROCID", "1"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEPID", "0"},
          {"SLURM_STEP_NODELIST", "node[07-08]"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_NTASKS_PER_NODE", "1"}};
}

// The batch script of `sbatch -N1 --ntasks-per-node=4` (no step variables).
EnvMap batch_shell() {
  return {{"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "gpu3"}, {"SLURM_JOB_NUM_NODES", "1"},
          {"SLURM_NNODES", "1"},  {"SLURM_NODEID", "0"},          {"SLURM_NTASKS", "4"},
          {"SLURM_PROCID", "0"},  {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_TASKS_PER_NODE", "4"}};
}

// The launcher's messages (util/log.hpp) while it lives: the message stream goes into a pipe; lines() reads
// what arrived since the last call and appends it to the lines it returns.
class LoggedLines {
 public:
  LoggedLines() : pipe_(make_pipe()), output_(pipe_.write.get(), pipe_.write.get()) {
    fcntl(pipe_.read.get(), F_SETFL, O_NONBLOCK);
  }
  std::vector<std::string>& lines() {
    char buffer[4096];
    for (ssize_t got; (got = read(pipe_.read.get(), buffer, sizeof buffer)) > 0;)
      pending_.append(buffer, static_cast<std::size_t>(got));
    for (std::size_t end; (end = pending_.find('\n')) != std::string::npos; pending_.erase(0, end + 1)) {
      lines_.push_back(pending_.substr(0, end));
    }
    return lines_;
  }

 private:
  Pipe pipe_;
  log::ScopedOutput output_;
  std::string pending_;
  std::vector<std::string> lines_;
};

LoadedConfig load_with_slurm(const std::string& yaml, const EnvMap& env, ConfigRequest request = {}) {
  LoadOptions options;
  options.make_run_id = [] { return std::string("generated-id"); };
  options.detect = slurm_launch_detector(env);
  return load_config_text(yaml, "configs/x.yaml", request, env, options);
}

struct FakeRunner {
  std::vector<std::vector<std::string>> calls;
  std::string state = "RUNNING";
  std::string run_time = "00:00:30", time_limit = "01:00:00";
  int requeue_exit = 0;
  std::string requeue_err;
  bool missing = false;
  CommandRunner runner() {
    return [this](const std::vector<std::string>& argv) {
      calls.push_back(argv);
      if (missing) throw SystemError("cannot start " + argv[0], ENOENT);
      CapturedRun run;
      run.exit_code = 0;
      if (argv.size() > 2 && argv[2] == "show") {
        run.out = "JobId=4242 JobName=train UserId=u(1) JobState=" + state + " Reason=None RunTime=" + run_time +
                  " TimeLimit=" + time_limit + "\n";
      } else {
        run.exit_code = requeue_exit;
        run.err = requeue_err;
      }
      return run;
    };
  }
};

}  // namespace

TEST_CASE("outside a job nothing is detected", "[slurm]") {
  SlurmDetection d = detect_slurm({{"PATH", "/bin"}, {"SLURM_NODEID", "0"}});
  CHECK(d.layout == SlurmLayout::kNone);
  CHECK_FALSE(d.in_job());
  CHECK(slurm_launch_settings(d).empty());
}

TEST_CASE("one launcher per node: every launch setting with its variable", "[slurm]") {
  SlurmDetection d = detect_slurm(step_on_node1());
  CHECK(d.layout == SlurmLayout::kLauncherPerNode);
  CHECK(d.job_id == "4242");
  REQUIRE(d.nnodes);
  CHECK(d.nnodes->value == "2");
  CHECK(d.nnodes->source == "SLURM_STEP_NUM_NODES");
  CHECK(d.node_rank->value == "1");
  CHECK(d.node_rank->source == "SLURM_NODEID");
  CHECK(d.master_addr->value == "node07");
  CHECK(d.master_addr->source == "SLURM_STEP_NODELIST");
  CHECK(d.master_port->value == std::to_string(20000 + 4242));
  CHECK(d.master_port->source == "SLURM_JOB_ID");
  CHECK(d.run_id->value == "slurm-4242");
  CHECK_FALSE(d.nproc);  // no GPUs, and SLURM_NTASKS_PER_NODE (1 launcher per node) is not the worker count
  CHECK_THAT(d.nproc_note, Catch::Contains("no GPUs in the allocation"));
  CHECK(d.problem.empty());
}

TEST_CASE("a step on some nodes of the job: its own node list and node ids", "[slurm]") {
  // `srun -N1 -w node2` inside a 2-node job: SLURM_NODEID and SLURM_NNODES are the step's.
  EnvMap env = step_on_node1();
  env["SLURM_STEP_NODELIST"] = "node08";
  env["SLURM_STEP_NUM_NODES"] = env["SLURM_NNODES"] = "1";
  env["SLURM_STEP_NUM_TASKS"] = env["SLURM_NTASKS"] = "1";
  env["SLURM_NODEID"] = "0";
  SlurmDetection d = detect_slurm(env);
  CHECK(d.layout == SlurmLayout::kLauncherPerNode);
  CHECK(d.master_addr->value == "node08");
  CHECK(d.nnodes->value == "1");
  CHECK_FALSE(d.master_port);  // one node: the launcher picks a free port
}

TEST_CASE("GPUs decide the worker count: on the node, per node (typed), or listed", "[slurm]") {
  EnvMap env = step_on_node1();
  env["SLURM_GPUS_ON_NODE"] = "4";
  env["SLURM_GPUS_PER_NODE"] = "a100:8";
  CHECK(detect_slurm(env).nproc->value == "4");
  CHECK(detect_slurm(env).nproc->source == "SLURM_GPUS_ON_NODE");
  env.erase("SLURM_GPUS_ON_NODE");
  CHECK(detect_slurm(env).nproc->value == "8");
  CHECK(detect_slurm(env).nproc->source == "SLURM_GPUS_PER_NODE");
  env.erase("SLURM_GPUS_PER_NODE");
  env["SLURM_STEP_GPUS"] = "0,1,2";
  CHECK(detect_slurm(env).nproc->value == "3");
  CHECK(detect_slurm(env).nproc_note.empty());

  CHECK(parse_slurm_gpu_count("4") == std::optional<int>(4));
  CHECK(parse_slurm_gpu_count("a100:4") == std::optional<int>(4));
  CHECK(parse_slurm_gpu_count("gpu:a100:2,v100:2") == std::optional<int>(4));
  CHECK_FALSE(parse_slurm_gpu_count("a100"));
  CHECK_FALSE(parse_slurm_gpu_count(""));
}

TEST_CASE("the job shell: run id and worker count, one node", "[slurm]") {
  SlurmDetection d = detect_slurm(batch_shell());
  CHECK(d.layout == SlurmLayout::kJobShell);
  CHECK(d.run_id->value == "slurm-77");
  CHECK(d.nproc->value == "4");
  CHECK(d.nproc->source == "SLURM_NTASKS_PER_NODE");
  CHECK_FALSE(d.nnodes);
  CHECK_FALSE(d.node_rank);
  CHECK_FALSE(d.master_addr);
  CHECK_FALSE(d.master_port);
  CHECK(d.notes.empty());

  EnvMap env = batch_shell();
  env.erase("SLURM_NTASKS_PER_NODE");
  env["SLURM_TASKS_PER_NODE"] = "2(x3)";
  CHECK(detect_slurm(env).nproc->value == "2");
  env["SLURM_GPUS_ON_NODE"] = "8";
  CHECK(detect_slurm(env).nproc->value == "8");
  // The batch step's special id counts as no step.
  env["SLURM_STEP_ID"] = "4294967294";
  CHECK(detect_slurm(env).layout == SlurmLayout::kJobShell);
}

TEST_CASE("the job shell of a multi-node job says it uses one node", "[slurm]") {
  EnvMap env = batch_shell();
  env["SLURM_JOB_NUM_NODES"] = env["SLURM_NNODES"] = "4";
  SlurmDetection d = detect_slurm(env);
  REQUIRE(d.notes.size() == 1);
  CHECK_THAT(d.notes[0], Catch::Contains("4-node job") && Catch::Contains("srun --ntasks-per-node=1 mgtrain launch"));
  CHECK_FALSE(d.nnodes);
}

TEST_CASE("a step with several tasks per node is refused with what to do", "[slurm][errors]") {
  // `srun --ntasks-per-node=1` in a job that asked for 6 tasks: srun ignores it and starts 6.
  EnvMap env = step_on_node1();
  env["SLURM_STEP_NUM_TASKS"] = env["SLURM_NTASKS"] = "6";
  SlurmDetection d = detect_slurm(env);
  CHECK(d.layout == SlurmLayout::kSeveralTasksPerNode);
  CHECK_THAT(d.problem, Catch::Contains("6 tasks on 2 nodes") &&
                            Catch::Contains("srun --ntasks=2 --ntasks-per-node=1") &&
                            Catch::Contains("launch.slurm: off"));
  CHECK_THROWS_WITH(load_with_slurm("", env), Catch::StartsWith("SLURM: this srun step runs 6 tasks on 2 nodes"));
  // ... unless detection is off.
  CHECK(load_with_slurm("launch:\n  slurm: off\n", env).config.launch.nnodes.text() == "1");
}

TEST_CASE("per-node task lists and the shared port and run id rules", "[slurm]") {
  CHECK(slurm_tasks_on_node("2(x3),1", 0) == std::optional<int>(2));
  CHECK(slurm_tasks_on_node("2(x3),1", 2) == std::optional<int>(2));
  CHECK(slurm_tasks_on_node("2(x3),1", 3) == std::optional<int>(1));
  CHECK_FALSE(slurm_tasks_on_node("2(x3),1", 4));
  CHECK_FALSE(slurm_tasks_on_node("2(x", 0));
  CHECK(slurm_port_for_job(123) == 20123);
  CHECK(slurm_port_for_job(40007) == 20007);
  CHECK(slurm_run_id("99") == "slurm-99");
  CHECK_THROWS_WITH(slurm_first_host({{"SLURM_JOB_NODELIST", "n[1-"}}),
                    "environment: SLURM_JOB_NODELIST: hostlist 'n[1-': '[' without ']'");
}

TEST_CASE("the config takes detected values only where no source gave one", "[slurm][config]") {
  LoadedConfig c = load_with_slurm("", step_on_node1());
  CHECK(c.config.launch.nnodes.text() == "2");
  CHECK(c.config.launch.node_rank == 1);
  CHECK(c.config.launch.master_addr == "node07");
  CHECK(c.config.launch.master_port == 24242);
  CHECK(c.config.launch.run_id == "slurm-4242");
  CHECK(c.config.launch.nproc.text() == "1");
  CHECK(c.origin.at("launch.node_rank") == "SLURM (SLURM_NODEID)");
  CHECK(c.origin.at("launch.run_id") == "SLURM (SLURM_JOB_ID)");
  CHECK(is_slurm_origin(c.origin.at("launch.nnodes")));
  CHECK(c.origin.at("launch.nproc") == "default");
  // ${run_id} expands to the job's run id, so a requeued job finds its checkpoints.
  CHECK(c.config.checkpoint.dir == "runs/slurm-4242/checkpoints");

  ConfigRequest request;
  request.flags = {{"launch.master_port", "29500", "--master-port"}};
  request.overrides = {"launch.run_id=mine"};
  EnvMap env = step_on_node1();
  env["MGTRAIN_LAUNCH_MASTER_ADDR"] = "10.0.0.1";
  LoadedConfig explicit_values = load_with_slurm("launch:\n  nnodes: 2\n", env, request);
  CHECK(explicit_values.config.launch.master_port == 29500);
  CHECK(explicit_values.config.launch.run_id == "mine");
  CHECK(explicit_values.config.launch.master_addr == "10.0.0.1");
  CHECK(explicit_values.origin.at("launch.nnodes") == "configs/x.yaml:2:11");
  CHECK(explicit_values.config.launch.node_rank == 1);  // still detected
  CHECK(explicit_values.config.checkpoint.dir == "runs/mine/checkpoints");
}

TEST_CASE("launch.slurm: off and hand-picked GPUs keep detection out", "[slurm][config]") {
  EnvMap env = step_on_node1();
  env["SLURM_GPUS_ON_NODE"] = "4";
  ConfigRequest off;
  off.flags = {{"launch.slurm", "off", "--slurm"}};
  LoadedConfig c = load_with_slurm("", env, off);
  CHECK(c.config.launch.nnodes.text() == "1");
  CHECK(c.config.launch.run_id == "generated-id");
  CHECK(load_with_slurm("", env).config.launch.nproc.text() == "4");
  ConfigRequest gpus;
  gpus.flags = {{"launch.gpu_ids", "0,1", "--gpu-ids"}};
  LoadedConfig picked = load_with_slurm("", env, gpus);
  CHECK(picked.config.launch.nproc.text() == "1");
  CHECK(picked.origin.at("launch.nproc") == "default");
}

TEST_CASE("the launch summary names each value's variable, or says it was given", "[slurm]") {
  EnvMap env = step_on_node1();
  env["SLURM_GPUS_ON_NODE"] = "4";
  env["SLURM_RESTART_COUNT"] = "2";
  SlurmDetection d = detect_slurm(env);
  LoadedConfig c = load_with_slurm("", env);
  SlurmLaunchFacts facts{2, 1, 4, "node07", 24242, "slurm-4242"};
  CHECK(slurm_launch_summary(d, facts, c.origin) ==
        "SLURM job 4242 (restart 2): node 1 of 2 (SLURM_NODEID, SLURM_STEP_NUM_NODES), master node07:24242 "
        "(SLURM_STEP_NODELIST, SLURM_JOB_ID), 4 workers (SLURM_GPUS_ON_NODE), run id slurm-4242 (SLURM_JOB_ID)");
  ConfigRequest request;
  request.flags = {{"launch.nproc", "2", "--nproc"}};
  LoadedConfig given = load_with_slurm("", env, request);
  facts.nproc = 2;
  CHECK_THAT(slurm_launch_summary(d, facts, given.origin), Catch::Contains(", 2 workers (given),"));
  SlurmLaunchFacts one_node{1, 0, 1, "gpu3", 0, "slurm-77"};
  LoadedConfig shell = load_with_slurm("", batch_shell());
  CHECK(slurm_launch_summary(detect_slurm(batch_shell()), one_node, shell.origin) ==
        "SLURM job 77: one node, 1 worker (SLURM_NTASKS_PER_NODE), run id slurm-77 (SLURM_JOB_ID)");
}

TEST_CASE("a rerun says what it resumes from", "[slurm]") {
  EnvMap env = step_on_node1();
  env["SLURM_RESTART_COUNT"] = "1";
  LoadedConfig c = load_with_slurm("", env);
  LaunchPlan plan;
  plan.nnodes = 2;
  plan.node_rank = 1;
  plan.master_addr = "node07";
  plan.master_port = 24242;
  plan.run_id = "slurm-4242";
  LoggedLines logged;
  announce_slurm_launch(detect_slurm(env), c, plan, true);
  std::vector<std::string>& lines = logged.lines();
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::StartsWith("mgtrain: SLURM job 4242 (restart 1): node 1 of 2"));
  CHECK_THAT(lines[1], Catch::StartsWith("mgtrain: note: SLURM: ") && Catch::Contains("no GPUs in the allocation"));
  CHECK(lines[2] ==
        "mgtrain: SLURM_RESTART_COUNT=1: job 4242 was requeued and this is a rerun of run slurm-4242; "
        "the workers resume from the newest checkpoint in runs/slurm-4242/checkpoints");
  lines.clear();
  announce_slurm_launch(detect_slurm({}), c, plan, true);
  CHECK(logged.lines().empty());
}

TEST_CASE("requeue decision: node 0, after the workers saved and stopped, not after scancel", "[slurm][requeue]") {
  const SlurmDetection d = detect_slurm(step_on_node1());
  const std::optional<SlurmJobState> none;
  CHECK(decide_slurm_requeue(d, true, 0, true, false, false, none).requeue);  // SIGUSR1: a warning
  CHECK(decide_slurm_requeue(d, true, 1, true, false, false, none).reason == "node 0 requeues the job");
  CHECK(decide_slurm_requeue(d, false, 0, true, false, false, none).reason == "launch.slurm_requeue is off");
  CHECK(decide_slurm_requeue(d, true, 0, false, false, false, none).reason ==
        "the workers did not stop after saving a checkpoint");
  CHECK(decide_slurm_requeue(d, true, 0, true, true, false, none).reason == "a worker failed");
  CHECK_FALSE(decide_slurm_requeue(SlurmDetection{}, true, 0, true, false, false, none).requeue);
  CHECK(decide_slurm_requeue(d, true, 0, true, false, false, SlurmJobState{"CANCELLED", {}, {}}).reason ==
        "the job was cancelled (scancel)");
  // SIGTERM: only at the time limit. scancel's job is COMPLETING (then CANCELLED) long before it.
  CHECK(decide_slurm_requeue(d, true, 0, true, false, true, SlurmJobState{"TIMEOUT", {}, {}}).requeue);
  CHECK(decide_slurm_requeue(d, true, 0, true, false, true, SlurmJobState{"COMPLETING", 3600, 3600}).requeue);
  CHECK_THAT(decide_slurm_requeue(d, true, 0, true, false, true, SlurmJobState{"COMPLETING", 2, 3600}).reason,
             Catch::StartsWith("SIGTERM before the time limit"));
  CHECK_FALSE(
      decide_slurm_requeue(d, true, 0, true, false, true, SlurmJobState{"COMPLETING", 2, std::nullopt}).requeue);
  CHECK_THAT(decide_slurm_requeue(d, true, 0, true, false, true, none).reason,
             Catch::Contains("scontrol could not say"));
}

TEST_CASE("the job's state and times from scontrol -o show job", "[slurm][requeue]") {
  SlurmJobState job = parse_slurm_job_state(
      "JobId=1 JobName=x JobState=COMPLETING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 "
      "ExitCode=0:0 RunTime=00:01:02 TimeLimit=00:01:00 TimeMin=N/A\n");
  CHECK(job.state == "COMPLETING");
  CHECK(job.run_time_s == std::optional<long long>(62));
  CHECK(job.time_limit_s == std::optional<long long>(60));
  CHECK(parse_slurm_job_state("JobId=1 OldJobState=RUNNING JobState=CANCELLED TimeLimit=UNLIMITED").state ==
        "CANCELLED");
  CHECK_FALSE(parse_slurm_job_state("JobId=1 TimeLimit=UNLIMITED").time_limit_s);
  CHECK(parse_slurm_job_state("no state").state.empty());
  CHECK(parse_slurm_duration("1-02:03:04") == std::optional<long long>(93784));
  CHECK(parse_slurm_duration("365-00:00:00") == std::optional<long long>(365LL * 86400));
  CHECK(parse_slurm_duration("05:30") == std::optional<long long>(330));
  CHECK(parse_slurm_duration("90") == std::optional<long long>(5400));
  CHECK_FALSE(parse_slurm_duration("UNLIMITED"));
  CHECK_FALSE(parse_slurm_duration("1:2:3:4"));
}

TEST_CASE("requeue runs scontrol, its failure is a warning with its stderr", "[slurm][requeue]") {
  const SlurmDetection d = detect_slurm(step_on_node1());
  LaunchConfig launch;
  LoggedLines logged;
  std::vector<std::string>& lines = logged.lines();

  FakeRunner ok;
  CHECK(requeue_after_preemption(d, launch, {0, true, false, false}, ok.runner()));
  REQUIRE(ok.calls.size() == 2);
  CHECK(ok.calls[0] == std::vector<std::string>{"scontrol", "-o", "show", "job", "4242"});
  CHECK(ok.calls[1] == std::vector<std::string>{"scontrol", "requeue", "4242"});
  CHECK(logged.lines().back() ==
        "mgtrain: requeueing SLURM job 4242 (scontrol requeue 4242): it will run again and resume from run slurm-4242");

  FakeRunner refused;
  refused.requeue_exit = 1;
  refused.requeue_err = "scontrol: error: Requested operation is presently disabled for job 4242\n";
  CHECK_FALSE(requeue_after_preemption(d, launch, {0, true, false, false}, refused.runner()));
  CHECK(logged.lines().back() ==
        "mgtrain: warning: scontrol requeue 4242 failed (exit code 1): scontrol: error: Requested operation is "
        "presently disabled for job 4242; submit the job again to resume");

  FakeRunner missing;
  missing.missing = true;
  CHECK_FALSE(requeue_after_preemption(d, launch, {0, true, false, false}, missing.runner()));
  CHECK_THAT(
      logged.lines().back(),
      Catch::StartsWith("mgtrain: warning: cannot run scontrol to requeue SLURM job 4242: cannot start scontrol"));

  FakeRunner cancelled;
  cancelled.state = "CANCELLED";
  CHECK_FALSE(requeue_after_preemption(d, launch, {0, true, false, false}, cancelled.runner()));
  CHECK(cancelled.calls.size() == 1);
  CHECK(logged.lines().back() == "mgtrain: SLURM job 4242 is not requeued: the job was cancelled (scancel)");

  // After SIGTERM: at the time limit yes, before it (scancel) no.
  FakeRunner timed_out;
  timed_out.state = "COMPLETING";
  timed_out.run_time = timed_out.time_limit = "01:00:00";
  CHECK(requeue_after_preemption(d, launch, {0, true, false, true}, timed_out.runner()));
  FakeRunner scancelled;
  scancelled.state = "COMPLETING";
  CHECK_FALSE(requeue_after_preemption(d, launch, {0, true, false, true}, scancelled.runner()));
  CHECK(scancelled.calls.size() == 1);
  CHECK_THAT(logged.lines().back(),
             Catch::StartsWith("mgtrain: SLURM job 4242 is not requeued: SIGTERM before the time limit"));

  FakeRunner quiet;
  lines.clear();
  CHECK_FALSE(requeue_after_preemption(d, launch, {1, true, false, false}, quiet.runner()));   // not node 0
  CHECK_FALSE(requeue_after_preemption(d, launch, {0, false, false, false}, quiet.runner()));  // finished or failed
  CHECK(quiet.calls.empty());
  CHECK(logged.lines().empty());
  // SIGTERM, but the workers did not save (they failed or were killed): nothing to resume from, no requeue.
  CHECK_FALSE(requeue_after_preemption(d, launch, {0, false, false, true}, quiet.runner()));
  CHECK(quiet.calls.empty());
  CHECK(logged.lines().empty());
  launch.slurm_requeue = false;
  CHECK_FALSE(requeue_after_preemption(d, launch, {0, true, false, false}, quiet.runner()));
  CHECK(quiet.calls.empty());
  CHECK(logged.lines().back() == "mgtrain: SLURM job 4242 is not requeued: launch.slurm_requeue is off");
}

TEST_CASE("one task per rank: the step's node list and tasks on this node", "[slurm][identity]") {
  EnvMap env = step_on_node1();
  env["SLURM_STEP_NODELIST"] = "node08";  // a step on part of the job: node07 would never answer
  env["SLURM_STEP_TASKS_PER_NODE"] = "3(x2)";
  env["SLURM_NTASKS"] = "6";
  env["SLURM_NTASKS_PER_NODE"] = "8";  // inherited from sbatch, not this step's layout
  env["SLURM_PROCID"] = "4";
  env["SLURM_LOCALID"] = "1";
  WorkerIdentity id = worker_identity_from_environment(env);
  CHECK(id.master_addr == "node08");
  CHECK(id.local_world_size == 3);
  CHECK(id.world_size == 6);
  CHECK(id.master_port == 24242);
}
