// Helpers of the checkpoint tests that run real training jobs (see checkpoint_jobs.hpp).
#include "checkpoint_jobs/checkpoint_jobs.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "integration/launch_fixture.hpp"
#include "support/directory_listing.hpp"

namespace mgtrain::testing {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
const std::string kBin = MGTRAIN_BIN_DIR;
const std::string kSource = MGTRAIN_SOURCE_DIR;
}  // namespace

std::vector<std::string> job_args(const std::string& log_dir, const std::string& run_id, int nproc,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      kBin + "/mgtrain",
      "launch",
      "--nproc",
      std::to_string(nproc),
      "--run-id",
      run_id,
      "--log-dir",
      log_dir,
      kSource + "/configs/bench/mlp-64.yaml",
      "checkpoint.dir=${log_dir}/${run_id}/checkpoints",  // the default; the bench config has none
      "data.synthetic_samples=4096",
      "train.max_steps=" + std::to_string(kSteps),
      "checkpoint.every_steps=" + std::to_string(kEvery),
      "checkpoint.every_epochs=0",
      "checkpoint.keep_last=10",
      "log.every_steps=1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string checkpoint_dir(const std::string& log_dir, const std::string& run_id) {
  return log_dir + "/" + run_id + "/checkpoints";
}

std::string checkpoint_path(const std::string& dir, std::int64_t step) {
  return dir + "/" + checkpoint_file_name(step);
}

Launcher::Launcher(const std::vector<std::string>& argv, const std::string& output_prefix,
                   std::optional<rlim_t> file_size_limit,
                   const std::vector<std::pair<std::string, std::string>>& extra_env) {
  out_path = output_prefix + ".out";
  err_path = output_prefix + ".err";
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    for (const auto& [key, value] : extra_env) ::setenv(key.c_str(), value.c_str(), 1);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (file_size_limit) {
      const struct rlimit limit = {*file_size_limit, *file_size_limit};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(126);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

Launcher::~Launcher() {
  if (!exit_code) {  // a failed test: leave nothing behind (the workers die with the launcher)
    ::kill(pid, SIGKILL);
    wait_for_exit(pid, 10s);
  }
}

int Launcher::wait(std::chrono::milliseconds timeout) {
  exit_code = wait_for_exit(pid, timeout);
  if (!exit_code) {
    ::kill(pid, SIGKILL);
    exit_code = wait_for_exit(pid, 10s);
    FAIL("the launcher did not finish within " << timeout.count() << " ms\n" << out() << err());
  }
  return *exit_code;
}

std::string Launcher::out() const { return read_text(out_path); }
std::string Launcher::err() const { return read_text(err_path); }

Outcome run_job(const std::vector<std::string>& args, const std::string& output_prefix,
                std::optional<rlim_t> file_size_limit) {
  Launcher launcher(args, output_prefix, file_size_limit);
  Outcome outcome;
  outcome.exit_code = launcher.wait();
  outcome.out = launcher.out();
  outcome.err = launcher.err();
  return outcome;
}

int last_logged_step(const std::string& text) {
  const std::string marker = "mgtrain: step ";
  const std::size_t at = text.rfind(marker);
  if (at == std::string::npos) return -1;
  return std::atoi(text.c_str() + at + marker.size());
}

std::vector<std::string> resume_lines(const std::string& output) {
  std::vector<std::string> found;
  for (const std::string& line : split_lines(output)) {
    if (line.find("mgtrain: resumed from ") != std::string::npos) found.push_back(line);
  }
  return found;
}

std::string resumed_line_for(const std::string& path, std::int64_t step) {
  return "mgtrain: resumed from " + path + ": step " + std::to_string(step) + ",";
}

std::vector<std::int64_t> checkpoint_steps(const std::string& dir) {
  std::vector<std::int64_t> steps;
  for (const CheckpointListing& entry : list_checkpoints(dir)) steps.push_back(entry.step);
  return steps;
}

std::string metadata(const std::string& path, const std::string& key) {
  const CheckpointFile file = read_checkpoint_file(path);
  auto found = file.metadata().find(key);
  return found == file.metadata().end() ? std::string("<missing>") : found->second;
}

std::size_t check_same_tensors(const std::string& a_path, const std::string& b_path,
                               const std::vector<std::string>& prefixes) {
  const CheckpointFile a = read_checkpoint_file(a_path);
  const CheckpointFile b = read_checkpoint_file(b_path);
  auto selected = [&](const std::string& name) {
    return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
  };
  std::vector<std::string> different;
  std::size_t compared = 0;
  for (const TensorEntry& entry : a.tensors()) {
    if (!selected(entry.name)) continue;
    const TensorEntry* other = b.find(entry.name);
    ++compared;
    if (other == nullptr) {
      different.push_back(entry.name + " (missing in the second)");
    } else if (other->dtype != entry.dtype || other->shape != entry.shape || other->nbytes != entry.nbytes ||
               std::memcmp(a.bytes(entry), b.bytes(*other), entry.nbytes) != 0) {
      different.push_back(entry.name);
    }
  }
  for (const TensorEntry& entry : b.tensors()) {
    if (selected(entry.name) && a.find(entry.name) == nullptr)
      different.push_back(entry.name + " (missing in the first)");
  }
  INFO(a_path << " vs " << b_path);
  CHECK(different == std::vector<std::string>{});
  return compared;
}

void check_same_training_state(const std::string& a_path, const std::string& b_path) {
  CHECK(metadata(a_path, "mgtrain.step") == metadata(b_path, "mgtrain.step"));
  CHECK(check_same_tensors(a_path, b_path, {"model/"}) >= 6);  // 3 linear layers: weights and biases
  CHECK(check_same_tensors(a_path, b_path, {"optim/"}) >= 6);  // one momentum buffer per parameter
  CHECK(check_same_tensors(a_path, b_path, {"rank0/", "rank1/"}) == 2);
}

std::map<int, pid_t> worker_pids(pid_t launcher) {
  std::map<int, pid_t> workers;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return workers;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const std::string dir = "/proc/" + std::string(entry->d_name);
    const std::string stat = read_text(dir + "/stat");
    const std::size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    char state = '?';
    long ppid = 0;
    fields >> state >> ppid;
    if (ppid != launcher || state == 'Z' || state == 'X') continue;
    if (read_text(dir + "/cmdline").find("mgtrain-worker") == std::string::npos) continue;
    std::string environ = read_text(dir + "/environ");
    for (char& c : environ)
      if (c == '\0') c = '\n';
    for (const std::string& line : split_lines(environ)) {
      if (line.rfind("RANK=", 0) == 0) workers[std::atoi(line.c_str() + 5)] = static_cast<pid_t>(pid);
    }
  }
  ::closedir(proc);
  return workers;
}

std::mt19937 seeded_random() {
  const char* fixed = std::getenv("MGTRAIN_TEST_SEED");
  const unsigned seed =
      fixed != nullptr ? static_cast<unsigned>(std::strtoul(fixed, nullptr, 10)) : std::random_device{}();
  UNSCOPED_INFO("random seed " << seed << " (repeat with MGTRAIN_TEST_SEED=" << seed << ")");
  return std::mt19937(seed);
}

const Reference& reference() {
  static std::unique_ptr<Reference> ref;  // removed (with its directory) when the process ends
  if (!ref) {
    auto r = std::make_unique<Reference>();
    const std::string log_dir = r->dir / "runs";
    Outcome a = run_job(job_args(log_dir, "reference", 2), r->dir / "reference");
    INFO(a.out << a.err);
    REQUIRE(a.exit_code == 0);
    r->out = a.out;
    r->checkpoints = checkpoint_dir(log_dir, "reference");
    r->final_checkpoint = checkpoint_path(r->checkpoints, kSteps);
    REQUIRE(checkpoint_steps(r->checkpoints) == std::vector<std::int64_t>{40, 80, 120, 160, 200, 240});
    ref = std::move(r);
  }
  return *ref;
}

void copy_reference_checkpoints(const std::string& dir, const std::vector<std::int64_t>& steps) {
  fs::create_directories(dir);
  for (std::int64_t step : steps)
    fs::copy_file(checkpoint_path(reference().checkpoints, step), checkpoint_path(dir, step));
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  file.get(byte);
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(byte ^ 0x10));
  REQUIRE(file.good());
}

}  // namespace mgtrain::testing
