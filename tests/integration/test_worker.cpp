// The worker binary end to end: under `mgtrain launch`, alone (world size 1), under its torch's torchrun,
// and as srun would start it (SLURM_PROCID/SLURM_NTASKS); plus its errors for bad data, an unreachable
// store and a peer that never arrives.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <regex>

#include "host/port_probe.hpp"
#include "process/run_capture.hpp"
#include "support/summary_line.hpp"
#include "support/temp_dir.hpp"

using namespace mgtrain;
using mgtrain::testing::summary_number;
namespace fs = std::filesystem;

namespace {

const std::string kBin = MGTRAIN_BIN_DIR;
const std::string kSource = MGTRAIN_SOURCE_DIR;

// A small learnable synthetic job: a few seconds on 2 CPUs.
std::vector<std::string> small_job(const fs::path& dir) {
  return {"model.type=mlp",
          "model.hidden_sizes=32",
          "data.dataset=synthetic",
          "data.input_shape=1,8,8",
          "data.synthetic_samples=2048",
          "train.epochs=2",
          "train.batch_size=32",
          "optim.lr=0.05",
          "log.every_steps=16",
          "launch.log_dir=" + dir.string()};
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// Two workers started by hand at once, as a launcher other than mgtrain would (each with `options_of(rank)`), and
// both waited for: ranks 0 and 1's runs.
std::pair<CapturedRun, CapturedRun> run_two_workers(const std::vector<std::string>& args,
                                                    const std::function<CaptureOptions(int rank)>& options_of) {
  std::vector<std::future<CapturedRun>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(
        std::async(std::launch::async, [args, options = options_of(r)] { return run_and_capture(args, options); }));
  }
  CapturedRun zero = ranks[0].get();
  return {std::move(zero), ranks[1].get()};
}

}  // namespace

TEST_CASE("two workers under mgtrain launch train and report one summary", "[worker][launch]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-launch");
  fs::path dir = temp_dir.path();
  auto args = with({kBin + "/mgtrain", "launch", "--nproc", "2", "--run-id", "r1"}, small_job(dir));
  CapturedRun run = run_and_capture(args, {});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(summary_number(run.out, "world_size") == 2);
  CHECK(summary_number(run.out, "steps") == 64);     // 2048 samples / 2 ranks / 32 per batch * 2 epochs
  CHECK(summary_number(run.out, "accuracy") > 0.6);  // learnable synthetic classes; chance is 0.1
  CHECK(summary_number(run.out, "samples_per_s") > 0);
  CHECK(run.out.find("[rank 0] {\"summary\":") != std::string::npos);
  CHECK(run.out.find("[rank 1] {\"summary\":") == std::string::npos);  // only rank 0 reports
  CHECK(fs::exists(dir / "r1/config.yaml"));
  CHECK(fs::file_size(dir / "r1/attempt_0/rank_1/stdout.log") == 0);
}

TEST_CASE("a worker started alone trains as world size 1", "[worker]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-alone");
  fs::path dir = temp_dir.path();
  CaptureOptions options;
  options.unset_env = {"RANK",        "WORLD_SIZE",   "LOCAL_RANK",   "MASTER_ADDR",
                       "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "MGTRAIN_CONFIG_FILE"};
  auto args = with({kBin + "/mgtrain-worker"}, small_job(dir));
  CapturedRun run = run_and_capture(args, options);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(summary_number(run.out, "world_size") == 1);
  CHECK(summary_number(run.out, "steps") == 128);
  CHECK(summary_number(run.out, "epochs") == 2);
  // train.device auto on a machine without GPUs is the CPU, without a word (a CUDA LibTorch used to warn every run).
  if (!fs::exists("/proc/driver/nvidia/gpus") && !fs::exists("/dev/nvidia0")) {
    CHECK(run.err.find("no GPU is visible") == std::string::npos);
    CHECK(run.err.find("warning") == std::string::npos);
  }
}

TEST_CASE("a resume names the config keys that differ, and the summary counts a partial epoch", "[worker][resume]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-resume-note");
  fs::path dir = temp_dir.path();
  CaptureOptions options;
  options.unset_env = {"RANK",        "WORLD_SIZE",   "LOCAL_RANK",   "MASTER_ADDR",
                       "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "MGTRAIN_CONFIG_FILE"};
  // 2048 samples of 32: 64 steps an epoch; 8 steps are an eighth of it.
  const auto job = with(small_job(dir), {"launch.run_id=same", "checkpoint.dir=" + (dir / "checkpoints").string(),
                                         "log.every_steps=4", "train.eval_at_epoch_end=false"});
  CapturedRun first = run_and_capture(with(with({kBin + "/mgtrain-worker"}, job), {"train.max_steps=8"}), options);
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  CHECK(summary_number(first.out, "epochs") == 0.125);
  CHECK(first.out.find("\"epochs\":0.125,") != std::string::npos);
  // checkpoint.resume names the directory's `latest` pointer: the file it names is resumed (resolve_checkpoint).
  CapturedRun second = run_and_capture(
      with(with({kBin + "/mgtrain-worker"}, job),
           {"train.max_steps=16", "optim.lr=0.02", "checkpoint.resume=" + (dir / "checkpoints/latest").string()}),
      options);
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(second.out.find("resumed from " + (dir / "checkpoints/checkpoint-step000000008.safetensors").string() +
                        ": step 8") != std::string::npos);
  CHECK(summary_number(second.out, "steps") == 16);
  CHECK(summary_number(second.out, "epochs") == 0.25);
  const std::string both = second.out + second.err;
  CHECK(both.find("note: the config differs from the one the checkpoint was saved with: ") != std::string::npos);
  CHECK(both.find("optim.lr 0.05 -> 0.02") != std::string::npos);
  CHECK(both.find("train.max_steps 8 -> 16") != std::string::npos);
}

TEST_CASE("ddp.force_process_group: a world of 1 trains through a real process group", "[worker]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-forced-group");
  fs::path dir = temp_dir.path();
  SocketPortProbe ports;
  CaptureOptions options;
  options.unset_env = {"LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "MGTRAIN_CONFIG_FILE"};
  options.set_env = {{"RANK", "0"},
                     {"WORLD_SIZE", "1"},
                     {"LOCAL_WORLD_SIZE", "1"},
                     {"MASTER_ADDR", "127.0.0.1"},
                     {"MASTER_PORT", std::to_string(ports.pick_free_port())}};
  auto args = with({kBin + "/mgtrain-worker"}, small_job(dir));
  args.push_back("ddp.force_process_group=true");
  CapturedRun run = run_and_capture(args, options);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(summary_number(run.out, "world_size") == 1);
  CHECK(run.out.find("\"backend\":\"gloo\"") != std::string::npos);  // not "none (world size 1)"
}

// The torchrun of the worker's own torch (Debian's 1.13 for the default flavour, the venv's 2.x for the LibTorch 2.x
// flavour): torchrun's agent hosts the store, and a store client speaks its own torch's protocol.
TEST_CASE("the worker runs under its torch's torchrun", "[worker][torchrun]") {
  const std::string torchrun = MGTRAIN_REFERENCE_TORCHRUN;
  if (torchrun.empty() || access(torchrun.c_str(), X_OK) != 0) {
    WARN("skipped: no torchrun of this build's torch at '"
         << torchrun
         << "' (default flavour: apt-get install python3-torch; "
            "LibTorch 2.x flavour: scripts/build-torch2.sh sets the venv's)");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-worker-test-torchrun");
  fs::path dir = temp_dir.path();
  // Static rendezvous on a free port (--standalone would always use port 29400). Debian's torchrun 1.13 crashes on
  // Python 3.11 unless --redirects/--tee get a per-rank mapping; 9:1 names no rank of these two.
  SocketPortProbe ports;
  auto args =
      with({torchrun, "--nnodes", "1", "--master_port", std::to_string(ports.pick_free_port()), "--nproc_per_node", "2",
            "--monitor_interval", "0.1", "--redirects", "9:1", "--tee", "9:1", "--no_python", kBin + "/mgtrain-worker"},
           small_job(dir));
  CaptureOptions options;
  options.set_env = {{"OMP_NUM_THREADS", "1"}};
  options.timeout_s = 120;
  options.own_process_group = true;  // a timeout ends torchrun's workers too
  CapturedRun run = run_and_capture(args, options);
  INFO(torchrun << "\n" << run.out << run.err);
  REQUIRE_FALSE(run.timed_out);
  REQUIRE(run.exit_code == 0);
  CHECK(summary_number(run.out, "world_size") == 2);
  CHECK(summary_number(run.out, "steps") == 64);
}

TEST_CASE("the worker takes its rank from srun's variables", "[worker][slurm]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-srun");
  fs::path dir = temp_dir.path();
  // SLURM derives the store port from the job id (20000 + id % 20000): find a free one in that range.
  SocketPortProbe ports;
  int port = 20000 + static_cast<int>(getpid() % 19000);
  while (!ports.is_free(port) && port < 39999) ++port;
  REQUIRE(ports.is_free(port));
  const auto [zero, one] = run_two_workers(with({kBin + "/mgtrain-worker"}, small_job(dir)), [&](int r) {
    CaptureOptions options;
    options.unset_env = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "MGTRAIN_CONFIG_FILE"};
    options.set_env = {{"SLURM_PROCID", std::to_string(r)},
                       {"SLURM_NTASKS", "2"},
                       {"SLURM_LOCALID", std::to_string(r)},
                       {"SLURM_NTASKS_PER_NODE", "2"},
                       {"SLURM_JOB_NODELIST", "localhost"},
                       {"SLURM_JOB_ID", std::to_string(port - 20000 + 7 * 20000)},
                       {"OMP_NUM_THREADS", "1"}};
    return options;
  });
  INFO(zero.out << zero.err << one.out << one.err);
  REQUIRE(zero.exit_code == 0);
  REQUIRE(one.exit_code == 0);
  CHECK(summary_number(zero.out, "world_size") == 2);
}

// Under torchrun a node that replaced a lost one counts its restarts from 0 while the others are further on: where
// rank 0 hosts the store of the attempt (no agent store), ranks whose restart counts differ must still meet.
TEST_CASE("ranks whose restart counts differ meet in rank 0's store", "[worker][torchrun][restart]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-restart-counts");
  fs::path dir = temp_dir.path();
  SocketPortProbe ports;
  const std::string port = std::to_string(ports.pick_free_port());
  const auto args = with({kBin + "/mgtrain-worker"}, with(small_job(dir), {"ddp.connect_timeout_s=60"}));
  const auto [zero, one] = run_two_workers(args, [&](int r) {
    CaptureOptions options;
    options.unset_env = {"SLURM_PROCID", "SLURM_NTASKS", "MGTRAIN_CONFIG_FILE", "TORCHELASTIC_USE_AGENT_STORE"};
    options.set_env = {{"RANK", std::to_string(r)},
                       {"WORLD_SIZE", "2"},
                       {"LOCAL_RANK", "0"},
                       {"LOCAL_WORLD_SIZE", "1"},
                       {"MASTER_ADDR", "127.0.0.1"},
                       {"MASTER_PORT", port},
                       {"TORCHELASTIC_RESTART_COUNT", r == 0 ? "3" : "0"},
                       {"OMP_NUM_THREADS", "1"}};
    options.timeout_s = 120;
    return options;
  });
  INFO(zero.out << zero.err << one.out << one.err);
  REQUIRE(zero.exit_code == 0);
  REQUIRE(one.exit_code == 0);
  CHECK(summary_number(zero.out, "world_size") == 2);
}

TEST_CASE("a malformed data file stops the job with the file named", "[worker][errors]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-baddata");
  fs::path dir = temp_dir.path();
  fs::create_directories(dir / "data");
  for (const char* name :
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    std::ofstream(dir / "data" / name) << "not an idx file";
  }
  CapturedRun run =
      run_and_capture({kBin + "/mgtrain", "launch", "--nproc", "2", kSource + "/configs/fashion_mnist_mlp.yaml",
                       "data.path=" + (dir / "data").string(), "launch.log_dir=" + dir.string()},
                      {});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find((dir / "data/train-images-idx3-ubyte").string()) != std::string::npos);
  CHECK(run.err.find("job failed") != std::string::npos);
}

TEST_CASE("an unreachable store and a missing peer are clear errors, not hangs", "[worker][errors]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-rendezvous");
  fs::path dir = temp_dir.path();
  SocketPortProbe ports;
  const int port = ports.pick_free_port();
  CaptureOptions client;
  client.unset_env = {"MGTRAIN_CONFIG_FILE"};
  client.set_env = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}};
  client.timeout_s = 60;
  auto args = with({kBin + "/mgtrain-worker"}, with(small_job(dir), {"ddp.connect_timeout_s=2"}));
  CapturedRun lonely_client = run_and_capture(args, client);
  CHECK(lonely_client.exit_code == 1);
  CHECK(lonely_client.err.find("rank 1 cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)) !=
        std::string::npos);

  CaptureOptions server = client;
  server.set_env["RANK"] = "0";
  CapturedRun lonely_server = run_and_capture(args, server);
  CHECK(lonely_server.exit_code == 1);
  CHECK(lonely_server.err.find("timed out after 2 s: ranks 0 arrived, ranks 1 did not") != std::string::npos);
}

TEST_CASE("mgtrain tokenize feeds a GPT that learns a repeating text", "[worker][gpt][tokens]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-gpt");
  fs::path dir = temp_dir.path();
  {
    std::ofstream text(dir / "input.txt");
    for (int i = 0; i < 3000; ++i) text << "the quick brown fox. ";
  }
  CapturedRun tokenize =
      run_and_capture({kBin + "/mgtrain", "tokenize", (dir / "input.txt").string(), (dir / "tokens").string()});
  INFO(tokenize.out << tokenize.err);
  REQUIRE(tokenize.exit_code == 0);
  CHECK(fs::exists(dir / "tokens/train.bin"));
  CHECK(fs::exists(dir / "tokens/meta.json"));
  CapturedRun run = run_and_capture(
      {kBin + "/mgtrain", "launch", "--nproc", "2", kSource + "/configs/tokens_gpt.yaml",
       "data.path=" + (dir / "tokens/train.bin").string(), "model.layers=1", "model.d_model=32", "model.heads=2",
       "model.context_length=32", "model.dropout=0", "train.epochs=1", "train.max_steps=60", "train.batch_size=16",
       "optim.lr=0.01", "optim.warmup_steps=5", "launch.log_dir=" + dir.string()},
      {});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const double perplexity = summary_number(run.out, "perplexity");
  CHECK(perplexity > 0);
  CHECK(perplexity < 3.0);  // 15 distinct characters: chance would be ~15
}

TEST_CASE("a TorchScript module scripted in Python trains under mgtrain launch", "[worker][torchscript]") {
  if (run_and_capture({"/usr/bin/python3", "-c", "import torch"}).exit_code != 0) {
    WARN("skipped: /usr/bin/python3 cannot import torch (apt-get install python3-torch)");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-worker-test-torchscript");
  fs::path dir = temp_dir.path();
  const std::string module = (dir / "net.pt").string();
  const std::string script =
      "import torch, torch.nn as nn\n"
      "class Net(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))\n"
      "    def forward(self, x):\n"
      "        return self.body(x)\n"
      "torch.jit.script(Net()).save('" +
      module + "')\n";
  std::ofstream(dir / "make_net.py") << script;  // torch.jit.script reads the class's source from a file
  CapturedRun make = run_and_capture({"/usr/bin/python3", (dir / "make_net.py").string()});
  INFO(make.err);
  REQUIRE(make.exit_code == 0);
  CapturedRun run = run_and_capture(
      {kBin + "/mgtrain", "launch", "--nproc", "2", kSource + "/configs/torchscript_mnist.yaml", "model.path=" + module,
       "data.dataset=synthetic", "data.input_shape=1,8,8", "data.synthetic_samples=2048", "train.epochs=2",
       "train.batch_size=32", "optim.lr=0.01", "launch.log_dir=" + dir.string()},
      {});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(summary_number(run.out, "accuracy") > 0.6);
}

TEST_CASE("the CIFAR ResNet trains on 3x32x32 inputs", "[worker][resnet]") {
  const testing::TempDir temp_dir("mgtrain-worker-test-resnet");
  fs::path dir = temp_dir.path();
  CapturedRun run =
      run_and_capture({kBin + "/mgtrain", "launch", "--nproc", "2", kSource + "/configs/cifar10_resnet.yaml",
                       "data.dataset=synthetic", "data.input_shape=3,32,32", "data.synthetic_samples=256",
                       "model.resnet_blocks=1", "train.max_steps=4", "train.batch_size=16",
                       "train.eval_at_epoch_end=false", "optim.warmup_steps=0", "launch.log_dir=" + dir.string()},
                      {});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(summary_number(run.out, "steps") == 4);
}
