// The launcher -> worker environment contract (torchrun's variables plus mgtrain's own).
#include <catch2/catch.hpp>

#include "supervise/launch_plan.hpp"
#include "supervise/worker_env.hpp"

using namespace mgtrain;

namespace {
LaunchPlan two_node_plan() {
  LaunchPlan plan;
  plan.nproc = 4;
  plan.nnodes = 2;
  plan.node_rank = 1;
  plan.world_size = 8;
  plan.master_addr = "node0";
  plan.max_restarts = 3;
  plan.run_id = "job-7";
  plan.run_dir = "/logs/job-7";
  plan.console.assign(4, {});
  return plan;
}
}  // namespace

TEST_CASE("worker variables match torchrun's", "[env]") {
  LaunchPlan plan = two_node_plan();
  EnvMap env = build_worker_environment(plan, WorkerSlot{2, 1, 29500, ""}, {{"SENTINEL", "kept"}, {"RANK", "stale"}});
  CHECK(env.at("LOCAL_RANK") == "2");
  CHECK(env.at("RANK") == "6");  // GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK
  CHECK(env.at("GROUP_RANK") == "1");
  CHECK(env.at("ROLE_RANK") == "6");
  CHECK(env.at("ROLE_NAME") == "default");
  CHECK(env.at("LOCAL_WORLD_SIZE") == "4");
  CHECK(env.at("WORLD_SIZE") == "8");
  CHECK(env.at("GROUP_WORLD_SIZE") == "2");
  CHECK(env.at("ROLE_WORLD_SIZE") == "8");
  CHECK(env.at("MASTER_ADDR") == "node0");
  CHECK(env.at("MASTER_PORT") == "29500");
  CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "3");
  CHECK(env.at("TORCHELASTIC_RUN_ID") == "job-7");
  CHECK(env.at("TORCHELASTIC_ERROR_FILE") == "/logs/job-7/attempt_1/rank_6/error.json");
  CHECK(env.at("MGTRAIN_RUN_DIR") == "/logs/job-7");
  CHECK(env.at("SENTINEL") == "kept");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "False");  // rank 0 hosts the TCPStore, not the launcher
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env.count("TORCHELASTIC_TIMER_FILE") == 0);
  CHECK(env.count("MGTRAIN_CONFIG_FILE") == 0);
  CHECK(env.count("CUDA_VISIBLE_DEVICES") == 0);
}

TEST_CASE("ROLE_RANK and ROLE_WORLD_SIZE count the workers of this node's role, GROUP_RANK and RANK the job's",
          "[env][roles]") {
  LaunchPlan plan = two_node_plan();  // node 1 of 2, 4 workers: global ranks 4-7 of 8
  plan.role = "reader";
  plan.role_first_rank = 1;  // the rendezvous: one reader worker on an earlier node, 5 readers in all
  plan.role_world_size = 5;
  EnvMap env = build_worker_environment(plan, WorkerSlot{2, 0, 29500, ""}, {});
  CHECK(env.at("RANK") == "6");
  CHECK(env.at("WORLD_SIZE") == "8");
  CHECK(env.at("GROUP_RANK") == "1");
  CHECK(env.at("ROLE_NAME") == "reader");
  CHECK(env.at("ROLE_RANK") == "3");
  CHECK(env.at("ROLE_WORLD_SIZE") == "5");
  // uneven nproc: the rendezvous's first rank, not node_rank * nproc
  plan.first_rank = 3;
  plan.world_size = 7;
  env = build_worker_environment(plan, WorkerSlot{0, 0, 29500, ""}, {});
  CHECK(env.at("RANK") == "3");
  CHECK(env.at("WORLD_SIZE") == "7");
  CHECK(env.at("ROLE_RANK") == "1");
}

TEST_CASE("mgtrain's own variables stay outside the config's MGTRAIN_<SECTION>_ namespace", "[env]") {
  for (const char* name : {kRunDirVariable, kConfigFileVariable, kHeartbeatFileVariable}) {
    std::string variable = name;
    for (const char* section : {"LAUNCH", "MODEL", "DATA", "TRAIN", "OPTIM", "DDP", "CHECKPOINT", "LOG"}) {
      CHECK(variable.rfind(std::string("MGTRAIN_") + section + "_", 0) != 0);
    }
  }
}

TEST_CASE("config file, heartbeat file and GPUs are set only when they apply", "[env]") {
  LaunchPlan plan = two_node_plan();
  plan.hang_timeout_s = 30;
  plan.gpu_for_local_rank = {"4", "5", "6", "GPU-abc"};
  EnvMap env = build_worker_environment(plan, WorkerSlot{3, 0, 1234, "/logs/job-7/config.yaml"},
                                        {{"CUDA_VISIBLE_DEVICES", "4,5,6,7"}});
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "GPU-abc");
  CHECK(env.at("MGTRAIN_CONFIG_FILE") == "/logs/job-7/config.yaml");
  CHECK(env.at("MGTRAIN_HEARTBEAT_FILE") == "/logs/job-7/attempt_0/rank_7/heartbeat");

  plan.virtual_local_rank = true;  // torchrun's --virtual-local-rank: LOCAL_RANK 0, the same GPU
  EnvMap virtual_rank = build_worker_environment(plan, WorkerSlot{3, 0, 1234, ""}, {});
  CHECK(virtual_rank.at("LOCAL_RANK") == "0");
  CHECK(virtual_rank.at("RANK") == "7");
  CHECK(virtual_rank.at("CUDA_VISIBLE_DEVICES") == "GPU-abc");
  plan.virtual_local_rank = false;

  plan.hang_timeout_s = 0;
  EnvMap unwatched = build_worker_environment(plan, WorkerSlot{0, 0, 1234, ""}, {{"MGTRAIN_HEARTBEAT_FILE", "/x"}});
  CHECK(unwatched.count("MGTRAIN_HEARTBEAT_FILE") == 0);
}

namespace {
CpuAllowance cpus(int count, std::optional<double> quota = std::nullopt) {
  CpuAllowance allowance;
  for (int cpu = 0; cpu < count; ++cpu) allowance.affinity.push_back(cpu);
  allowance.quota_cpus = quota;
  return allowance;
}
std::string omp_of(const LaunchPlan& plan, const EnvMap& parent = {}) {
  const EnvMap env = build_worker_environment(plan, WorkerSlot{0, 0, 1, ""}, parent);
  return env.count("OMP_NUM_THREADS") != 0 ? env.at("OMP_NUM_THREADS") : "unset";
}
}  // namespace

TEST_CASE("worker threads: the CPUs this node may use, divided among its workers", "[env][threads]") {
  LaunchPlan plan = two_node_plan();  // 4 workers
  plan.cpus = cpus(16);
  CHECK(omp_of(plan) == "4");
  CHECK(choose_worker_threads(plan, {}).notice ==
        "setting OMP_NUM_THREADS=4 for each of the 4 workers: 16 CPUs (affinity 0-15) shared by 4 workers; set "
        "OMP_NUM_THREADS or --threads-per-worker to choose");
  plan.cpus = cpus(6);  // not a multiple: never more threads than CPUs
  CHECK(omp_of(plan) == "1");
  plan.cpus = cpus(2);  // more workers than CPUs: one each
  CHECK(omp_of(plan) == "1");
  plan.nproc = 1;  // one worker per node gets a count too (OpenMP's default would spin on every core)
  CHECK(omp_of(plan) == "2");
  CHECK_THAT(choose_worker_threads(plan, {}).notice,
             Catch::StartsWith("setting OMP_NUM_THREADS=2 for the worker: 2 CPUs (affinity 0-1) shared by 1 worker;"));
}

TEST_CASE("worker threads: the cgroup's quota bounds them", "[env][threads]") {
  LaunchPlan plan = two_node_plan();
  plan.cpus = cpus(64, 8.0);
  CHECK(omp_of(plan) == "2");
  CHECK_THAT(choose_worker_threads(plan, {}).notice, Catch::Contains("8 CPUs (cgroup quota 8 CPUs, affinity 0-63)"));
  plan.cpus = cpus(64, 2.5);
  CHECK(omp_of(plan) == "1");
}

TEST_CASE("worker threads: nodes on the same CPUs share them", "[env][threads]") {
  LaunchPlan plan = two_node_plan();
  plan.nproc = 1;
  plan.cpus = cpus(8);
  plan.workers_sharing_cpus = 4;  // this node's worker and three of other nodes on this machine
  CHECK(omp_of(plan) == "2");
  CHECK_THAT(choose_worker_threads(plan, {}).notice,
             Catch::Contains("shared by 4 workers (1 on this node, the others on nodes on the same CPUs)"));
}

TEST_CASE("worker threads: the user's OMP_NUM_THREADS and launch.threads_per_worker win", "[env][threads]") {
  LaunchPlan plan = two_node_plan();
  plan.cpus = cpus(16);
  CHECK(omp_of(plan, {{"OMP_NUM_THREADS", "8"}}) == "8");
  CHECK(choose_worker_threads(plan, {{"OMP_NUM_THREADS", "8"}}).notice.empty());
  plan.threads_per_worker = 3;  // the key is explicit: it wins over an inherited variable too, and says nothing
  CHECK(omp_of(plan) == "3");
  CHECK(omp_of(plan, {{"OMP_NUM_THREADS", "8"}}) == "3");
  CHECK(choose_worker_threads(plan, {}).notice.empty());
}

TEST_CASE("worker threads: the torchrun personality keeps torchrun's rule", "[env][threads]") {
  LaunchPlan plan = two_node_plan();
  plan.personality = Personality::Torchrun;
  plan.cpus = cpus(16);
  CHECK(omp_of(plan) == "1");
  CHECK_THAT(choose_worker_threads(plan, {}).notice,
             Catch::Equals("setting OMP_NUM_THREADS=1 for each of the 4 workers to avoid overloading the machine; set "
                           "OMP_NUM_THREADS yourself to tune it"));
  CHECK(omp_of(plan, {{"OMP_NUM_THREADS", "8"}}) == "8");
  plan.nproc = 1;
  CHECK(omp_of(plan) == "unset");
  CHECK(choose_worker_threads(plan, {}).notice.empty());
}

TEST_CASE("${local_rank} in the command is replaced per worker", "[env]") {
  std::vector<std::string> command = {"train", "--out=log_${local_rank}.txt", "${local_rank}${local_rank}", "${rank}"};
  CHECK(expand_worker_command(command, 12) == std::vector<std::string>{"train", "--out=log_12.txt", "1212", "${rank}"});
}

TEST_CASE("only workers whose stdout reaches the console hear whether it is a terminal", "[env]") {
  LaunchPlan plan = two_node_plan();
  const EnvMap parent{{"MGTRAIN_CONSOLE_IS_TTY", "1"}, {"MGTRAIN_CONSOLE_COLUMNS", "200"}};  // from a launcher above us
  WorkerSlot terminal{0, 0, 1, ""};
  terminal.stdout_to_console = true;
  terminal.console_columns = 132;
  EnvMap env = build_worker_environment(plan, terminal, parent);
  CHECK(env.at("MGTRAIN_CONSOLE_IS_TTY") == "1");
  CHECK(env.at("MGTRAIN_CONSOLE_COLUMNS") == "132");

  WorkerSlot pipe{1, 0, 1, ""};
  pipe.stdout_to_console = true;  // a console that is a file or a pipe
  env = build_worker_environment(plan, pipe, parent);
  CHECK(env.at("MGTRAIN_CONSOLE_IS_TTY") == "0");
  CHECK(env.count("MGTRAIN_CONSOLE_COLUMNS") == 0);

  env = build_worker_environment(plan, WorkerSlot{2, 0, 1, ""}, parent);  // stdout only to its log file
  CHECK(env.count("MGTRAIN_CONSOLE_IS_TTY") == 0);
  CHECK(env.count("MGTRAIN_CONSOLE_COLUMNS") == 0);
}

TEST_CASE("NCCL error handling: the parent's values win, and the file timer's pipe is passed on", "[env]") {
  LaunchPlan plan = two_node_plan();
  plan.timer_file = "/tmp/timer.fifo";
  EnvMap env = build_worker_environment(plan, WorkerSlot{0, 0, 29500, ""},
                                        {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"},
                                         {"NCCL_ASYNC_ERROR_HANDLING", "0"},
                                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
  CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "False");  // a launcher above us hosted its store, not ours
  CHECK(env.at("TORCHELASTIC_TIMER_FILE") == "/tmp/timer.fifo");
}
