// Checkpoints end to end with real processes: the `mgtrain` launcher running the built-in trainer (2 workers,
// gloo on CPU, configs/bench/mlp-64.yaml on small synthetic data). A worker SIGKILLed at a random step after
// the first checkpoint plus a launcher restart ends with parameters and optimizer state bit-identical to an
// uninterrupted run; SIGTERM and SIGUSR1 to the launcher save at an agreed step and stop (exit 75) and a rerun
// resumes bit-identically; a damaged newest checkpoint is skipped with a warning; resume never / PATH; another
// world size; a changed model is refused; RLIMIT_FSIZE makes the writer fail (stop or continue); keep_last.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint_jobs/checkpoint_jobs.hpp"
#include "integration/launch_fixture.hpp"
#include "support/directory_listing.hpp"
#include "support/summary_line.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Waits until the checkpoint of step `kEvery` exists and rank 0 logged step `at_least` or later in attempt 0.
void wait_for_first_checkpoint_and_step(const std::string& run_dir, int at_least, const Launcher& launcher) {
  const std::string first = checkpoint_path(run_dir + "/checkpoints", kEvery);
  const std::string rank0_log = run_dir + "/attempt_0/rank_0/stdout.log";
  const bool reached =
      wait_until([&] { return file_exists(first) && last_logged_step(read_text(rank0_log)) >= at_least; }, 60s);
  INFO(launcher.out() << launcher.err());
  REQUIRE(reached);
}

std::string regex_escape(const std::string& text) {
  return std::regex_replace(text, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
}

}  // namespace

TEST_CASE("the reference run saves the full training state", "[checkpoint][resume]") {
  const Reference& ref = reference();
  const CheckpointFile file = read_checkpoint_file(ref.final_checkpoint);
  CHECK(file.metadata().at("mgtrain.step") == "240");
  CHECK(file.metadata().at("mgtrain.world_size") == "2");
  CHECK(file.metadata().at("mgtrain.epoch") == "3");                // 64 steps per epoch: 240 = 3 epochs + 48 steps
  CHECK(file.metadata().at("mgtrain.samples_in_epoch") == "3072");  // 48 steps x 32 x 2 ranks
  CHECK(file.find("rank0/rng/cpu") != nullptr);
  CHECK(file.find("rank1/rng/cpu") != nullptr);
  CHECK(read_latest_pointer(ref.checkpoints) == checkpoint_file_name(kSteps));
  CHECK_THAT(ref.out,
             Contains("mgtrain: checkpoint (every_steps) step 40: " + checkpoint_path(ref.checkpoints, 40) + ", "));
  CHECK(resume_lines(ref.out).empty());
}

TEST_CASE("a worker SIGKILLed after the first checkpoint: the launcher restarts and training ends bit-identical",
          "[checkpoint][resume][restart]") {
  const Reference& ref = reference();
  std::mt19937 random = seeded_random();
  int kill_after_step = std::uniform_int_distribution<int>(kEvery + 1, kSteps - 100)(random);
  const int victim = std::uniform_int_distribution<int>(0, 1)(random);
  UNSCOPED_INFO("SIGKILL to rank " << victim << " once rank 0 logged step " << kill_after_step);

  // A step takes about a millisecond: on a busy machine the test may see the step and send the signal after the job
  // has already finished its last step. The kill must land mid-training for the case to mean anything, so such a
  // late kill is tried again, earlier (the job's behaviour is not in question then, only the test's timing).
  std::optional<TempDir> dir;
  std::string log_dir, run_dir, out, err;
  int code = -1, reached = kSteps;
  for (int attempt = 0; attempt < 3 && reached >= kSteps; ++attempt) {
    dir.emplace();
    log_dir = *dir / "runs";
    run_dir = log_dir + "/b";
    // Files only: the restart resumes from the newest file, not from a snapshot in memory (test_snapshot_resume.cpp).
    Launcher b(job_args(log_dir, "b", 2, {"--max-restarts", "1", "checkpoint.snapshot_every=0"}), *dir / "b");
    wait_for_first_checkpoint_and_step(run_dir, kill_after_step, b);
    const std::map<int, pid_t> workers = worker_pids(b.pid);
    REQUIRE(workers.size() == 2);
    REQUIRE(::kill(workers.at(victim), SIGKILL) == 0);
    code = b.wait();
    out = b.out();
    err = b.err();
    reached = last_logged_step(read_text(run_dir + "/attempt_0/rank_0/stdout.log"));
    if (reached >= kSteps) {
      WARN("the kill after step " << kill_after_step << " came after the last step; trying again at step "
                                  << kEvery + 1);
      kill_after_step = kEvery + 1;
    }
  }
  INFO(out << err);
  REQUIRE(code == 0);
  // The group really restarted: a second attempt, whose rank 0 resumed from a periodic checkpoint.
  CHECK(fs::is_directory(run_dir + "/attempt_1/rank_0"));
  CHECK_FALSE(fs::exists(run_dir + "/attempt_2"));
  const std::string attempt0 = read_text(run_dir + "/attempt_0/rank_0/stdout.log");
  const std::string attempt1 = read_text(run_dir + "/attempt_1/rank_0/stdout.log");
  CHECK(reached < kSteps);  // attempt 0's last completed step
  // The newest checkpoint attempt 0 announced as written (a later one may exist unannounced: killed after the
  // rename, or written by rank 0 after rank 1 died).
  int announced = 0;
  {
    const std::regex line(R"(mgtrain: checkpoint \(every_steps\) step ([0-9]+):)");
    for (auto it = std::sregex_iterator(attempt0.begin(), attempt0.end(), line); it != std::sregex_iterator(); ++it) {
      announced = std::max(announced, std::stoi((*it)[1].str()));
    }
  }
  UNSCOPED_INFO("attempt 0 reached step " << reached << ", its newest announced checkpoint is step " << announced);
  const std::vector<std::string> resumed = resume_lines(attempt1);
  REQUIRE(resumed.size() == 1);
  CHECK(resume_lines(out).size() == 1);
  std::smatch m;
  REQUIRE(std::regex_search(resumed[0], m, std::regex(R"(resumed from (.*): step ([0-9]+),)")));
  const int resumed_step = std::stoi(m[2].str());
  CHECK(m[1].str() == checkpoint_path(run_dir + "/checkpoints", resumed_step));
  CHECK(resumed_step % kEvery == 0);
  CHECK(resumed_step >= std::max(announced, kEvery));  // the newest valid one
  CHECK(resumed_step <= reached);
  CHECK_THAT(attempt1, Contains("mgtrain: step " + std::to_string(resumed_step + 1) + "/240 "));
  CHECK(last_logged_step(attempt1) == kSteps);
  CHECK(summary_number(out, "steps") == kSteps);

  check_same_training_state(ref.final_checkpoint, checkpoint_path(run_dir + "/checkpoints", kSteps));
}

TEST_CASE(
    "SIGTERM to the launcher: the workers save at an agreed step and exit 75, the launcher too, and a rerun resumes",
    "[checkpoint][resume][signals]") {
  const Reference& ref = reference();
  std::mt19937 random = seeded_random();
  const int stop_after_step = std::uniform_int_distribution<int>(kEvery + 1, kSteps - 100)(random);
  UNSCOPED_INFO("SIGTERM once rank 0 logged step " << stop_after_step);

  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string run_dir = log_dir + "/term";
  const std::string checkpoints = run_dir + "/checkpoints";
  const auto args = job_args(log_dir, "term", 2);
  {
    Launcher launcher(args, dir / "first");
    wait_for_first_checkpoint_and_step(run_dir, stop_after_step, launcher);
    REQUIRE(::kill(launcher.pid, SIGTERM) == 0);
    const int code = launcher.wait();
    const std::string out = launcher.out(), err = launcher.err();
    INFO(out << err);
    CHECK(code == 75);
    CHECK_THAT(err, Contains("mgtrain: stopped by SIGTERM; the workers of run term saved a checkpoint and stopped; run "
                             "the same command again to resume (exit code 75)"));
    CHECK_FALSE(fs::exists(run_dir + "/failure.json"));  // exit 75 is no failure
    CHECK_THAT(read_text(run_dir + "/attempt_0/rank_0/stderr.log"), Contains("SIGTERM: saved a checkpoint at step"));
  }
  const auto listing = list_checkpoints(checkpoints);
  REQUIRE(listing.size() >= 2);
  const CheckpointListing& stop = listing.back();
  const CheckpointListing& periodic = listing[listing.size() - 2];
  UNSCOPED_INFO("stopped at step " << stop.step);
  CHECK(stop.step > periodic.step);
  CHECK(stop.step < kSteps);
  CHECK(stop.step >= stop_after_step);
  CHECK(metadata(stop.path, "mgtrain.reason") == "stop requested");
  CHECK(metadata(periodic.path, "mgtrain.reason") == "every_steps");
  CHECK(periodic.step % kEvery == 0);
  CHECK(read_latest_pointer(checkpoints) == stop.name);
  // Both ranks' RNG states are in it: the save was collective.
  CHECK(read_checkpoint_file(stop.path).find("rank1/rng/cpu") != nullptr);

  // The same command again resumes from the stop checkpoint and ends where an uninterrupted run ends.
  Outcome again = run_job(args, dir / "again");
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.err, Contains("mgtrain: run term was launched before; its logs are kept in"));
  CHECK_THAT(again.out, Contains(resumed_line_for(stop.path, stop.step)));
  CHECK(summary_number(again.out, "steps") == kSteps);
  check_same_training_state(ref.final_checkpoint, checkpoint_path(checkpoints, kSteps));
}

TEST_CASE("SIGUSR1 to the launcher is forwarded: the workers save and stop, the launcher exits 75",
          "[checkpoint][resume][signals]") {
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string run_dir = log_dir + "/usr1";
  Launcher launcher(job_args(log_dir, "usr1", 2), dir / "usr1");
  wait_for_first_checkpoint_and_step(run_dir, kEvery + 5, launcher);
  REQUIRE(::kill(launcher.pid, SIGUSR1) == 0);
  const int code = launcher.wait();
  const std::string out = launcher.out(), err = launcher.err();
  INFO(out << err);
  CHECK(code == 75);
  CHECK_THAT(err, Contains("mgtrain: the workers of run usr1 saved a checkpoint and stopped on request; run the same "
                           "command again to resume (exit code 75)"));
  CHECK_THAT(err, Contains("SIGUSR1: saved a checkpoint at step"));
  CHECK_FALSE(fs::exists(run_dir + "/failure.json"));
  const auto listing = list_checkpoints(run_dir + "/checkpoints");
  REQUIRE_FALSE(listing.empty());
  CHECK(listing.back().step < kSteps);
  CHECK(metadata(listing.back().path, "mgtrain.reason") == "stop requested");
  CHECK(summary_number(out, "steps") == listing.back().step);
}

TEST_CASE("a damaged newest checkpoint is skipped with a warning naming it, and the previous one is used",
          "[checkpoint][resume][corrupt]") {
  const Reference& ref = reference();
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string checkpoints = checkpoint_dir(log_dir, "damaged");
  copy_reference_checkpoints(checkpoints, {160, 200, 240});
  const std::string newest = checkpoint_path(checkpoints, 240);
  const std::string previous = checkpoint_path(checkpoints, 200);
  const auto args = job_args(log_dir, "damaged", 2);

  SECTION("a flipped byte") {
    flip_byte(newest, fs::file_size(newest) / 2);
    Outcome run = run_job(args, dir / "flipped");
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("mgtrain: warning: skipping damaged checkpoint: " + newest + ": checksum mismatch"));
    CHECK_THAT(run.err, Contains(", using " + previous));
    CHECK_THAT(run.out, Contains(resumed_line_for(previous, 200)));
    CHECK(resume_lines(run.out).size() == 1);
    // 40 more steps from 200 give the reference's final state again (the damaged file is replaced).
    CHECK(summary_number(run.out, "steps") == kSteps);
    check_same_training_state(ref.final_checkpoint, newest);
  }
  SECTION("a truncated file") {
    fs::resize_file(newest, fs::file_size(newest) - 1000);
    // One rank resumes (cheaper; the rest of the epoch is re-sharded), so no comparison with the reference.
    Outcome run = run_job(job_args(log_dir, "damaged", 1), dir / "truncated");
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("mgtrain: warning: skipping damaged checkpoint: " + newest + ": truncated"));
    CHECK_THAT(run.err, Contains(", using " + previous));
    CHECK_THAT(run.out, Contains(resumed_line_for(previous, 200)));
    CHECK(resume_lines(run.out).size() == 1);
    CHECK(summary_number(run.out, "steps") == kSteps);
    CHECK(verify_checkpoint_file(newest) == "");  // replaced by the resumed run's own save
  }
}

TEST_CASE("checkpoint.resume: never starts over, PATH resumes from that file, a damaged PATH is refused",
          "[checkpoint][resume]") {
  const Reference& ref = reference();
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string checkpoints = checkpoint_dir(log_dir, "choose");
  copy_reference_checkpoints(checkpoints, {80, 200});

  SECTION("never") {
    // One rank is enough to see that it starts over (and cheaper).
    Outcome run = run_job(job_args(log_dir, "choose", 1, {"checkpoint.resume=never"}), dir / "never");
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(resume_lines(run.out).empty());
    CHECK_THAT(run.out, Contains("mgtrain: step 1/240 "));
    CHECK(summary_number(run.out, "steps") == kSteps);
    // The copied checkpoints were replaced by this run's own saves.
    CHECK(checkpoint_steps(checkpoints) == std::vector<std::int64_t>{40, 80, 120, 160, 200, 240});
    CHECK(metadata(checkpoint_path(checkpoints, 80), "mgtrain.world_size") == "1");
    CHECK(metadata(checkpoint_path(checkpoints, 200), "mgtrain.world_size") == "1");
  }
  SECTION("PATH to an older checkpoint") {
    const std::string older = checkpoint_path(checkpoints, 80);
    Outcome run = run_job(job_args(log_dir, "choose", 2, {"checkpoint.resume=" + older}), dir / "path");
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains(resumed_line_for(older, 80)));
    CHECK(resume_lines(run.out).size() == 1);
    CHECK_THAT(run.out, Contains("mgtrain: step 81/240 "));
    CHECK_FALSE(Catch::Matchers::Contains("mgtrain: step 80/240 ").match(run.out));
    check_same_training_state(ref.final_checkpoint, checkpoint_path(checkpoints, kSteps));
  }
  SECTION("PATH to a damaged file") {
    const std::string damaged = dir / "damaged.safetensors";
    fs::copy_file(checkpoint_path(checkpoints, 80), damaged);
    flip_byte(damaged, fs::file_size(damaged) - 10);
    // One rank: with two, the exit code is racy (see the hidden test below).
    Outcome run = run_job(job_args(log_dir, "choose", 1, {"checkpoint.resume=" + damaged}), dir / "damaged");
    INFO(run.out << run.err);
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("checkpoint.resume: " + damaged + ": checksum mismatch"));
    CHECK(resume_lines(run.out).empty());
    CHECK(checkpoint_steps(checkpoints) == std::vector<std::int64_t>{80, 200});  // nothing trained, nothing saved
  }
}

// With two ranks, rank 0 refuses the damaged file and tells rank 1, which waits until rank 0 has gone before it
// exits 2 too, so the launcher names rank 0 (not a "connection closed" on rank 1) and exits 2.
TEST_CASE("checkpoint.resume: a damaged PATH exits 2 with two ranks too", "[checkpoint][resume]") {
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string damaged = dir / "damaged.safetensors";
  fs::copy_file(checkpoint_path(reference().checkpoints, 80), damaged);
  flip_byte(damaged, fs::file_size(damaged) - 10);
  Outcome run = run_job(job_args(log_dir, "choose2", 2, {"checkpoint.resume=" + damaged}), dir / "damaged");
  INFO(run.out << run.err);
  CHECK_THAT(run.err, Contains("checkpoint.resume: " + damaged + ": checksum mismatch"));
  CHECK(run.exit_code == 2);
}

TEST_CASE("resuming with another world size re-shards the epoch, and another model shape is refused",
          "[checkpoint][resume][world]") {
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string checkpoints = checkpoint_dir(log_dir, "world");
  copy_reference_checkpoints(checkpoints, {200});  // world 2, epoch 4, 8 of its 64 steps done
  const std::string saved = checkpoint_path(checkpoints, 200);
  CHECK(metadata(saved, "mgtrain.samples_in_epoch") == "512");

  SECTION("2 ranks saved, 1 resumes") {
    Outcome run = run_job(job_args(log_dir, "world", 1), dir / "one");
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains(resumed_line_for(saved, 200) + " epoch 4, 512 samples into the epoch"));
    CHECK_THAT(run.out, Contains("mgtrain: note: the checkpoint was saved by 2 ranks, this run has 1: the rest of the "
                                 "epoch is re-sharded over 1 ranks"));
    CHECK(summary_number(run.out, "steps") == kSteps);
    CHECK(summary_number(run.out, "world_size") == 1);
    const std::string last = checkpoint_path(checkpoints, kSteps);
    REQUIRE(file_exists(last));
    CHECK(metadata(last, "mgtrain.world_size") == "1");
    // 40 steps of 32 samples at world 1 after 512 of epoch 4's 4096 samples.
    CHECK(metadata(last, "mgtrain.epoch") == "3");
    CHECK(metadata(last, "mgtrain.samples_in_epoch") == std::to_string(512 + 40 * 32));
  }
  SECTION("model.hidden_sizes changed") {
    const CheckpointFile file = read_checkpoint_file(saved);
    std::string first_weight;
    for (const TensorEntry& entry : file.tensors()) {
      if (entry.name.rfind("model/", 0) == 0 && entry.shape == std::vector<std::int64_t>{64, 784}) {
        first_weight = entry.name;
        break;
      }
    }
    REQUIRE_FALSE(first_weight.empty());
    Outcome run = run_job(job_args(log_dir, "world", 1, {"model.hidden_sizes=32,64"}), dir / "shape");
    INFO(run.out << run.err);
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("checkpoint does not match the model: " + first_weight +
                                 " has shape [64, 784] in the checkpoint and [32, 784] in the model"));
    CHECK(resume_lines(run.out).empty());
    CHECK(checkpoint_steps(checkpoints) == std::vector<std::int64_t>{200});
  }
}

TEST_CASE(
    "a checkpoint that cannot be written (RLIMIT_FSIZE) stops the job, or only warns with on_write_error continue",
    "[checkpoint][resume][disk]") {
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string checkpoints = checkpoint_dir(log_dir, "fsize");
  constexpr rlim_t kLimit = 64 * 1024;  // a checkpoint is ~440 KB; logs and config stay far below
  const std::vector<std::string> short_job = {"train.max_steps=60", "checkpoint.every_steps=20"};

  SECTION("stop (the default)") {
    auto args = job_args(log_dir, "fsize", 2, short_job);
    Outcome run = run_job(args, dir / "stop", kLimit);
    INFO(run.out << run.err);
    CHECK(run.exit_code == 1);
    const std::regex message(regex_escape("could not write checkpoint " + checkpoint_path(checkpoints, 20) +
                                          ": write " + checkpoints + "/." + checkpoint_file_name(20) + ".tmp.") +
                             "[0-9]+[^\n]*File too large");
    CHECK(std::regex_search(run.err, message));
    CHECK_THAT(run.err, Contains("(checkpoint.on_write_error: stop)"));
    CHECK(checkpoint_steps(checkpoints).empty());  // no partial file under a final name
    for (const std::string& name : names_in(checkpoints)) CHECK(name.find(".safetensors") == std::string::npos);
    CHECK(last_logged_step(read_text(log_dir + "/fsize/attempt_0/rank_0/stdout.log")) < 60);
    // The shared-memory segment cannot be sized under that limit either: a note, Gloo, and nothing left in /dev/shm.
    CHECK_THAT(run.err, Contains("shared-memory all-reduce not available"));
    for (const std::string& name : names_in("/dev/shm")) CHECK(name.find("-fsize-") == std::string::npos);
  }
  SECTION("continue") {
    auto args = job_args(log_dir, "fsize", 1, short_job);
    args.push_back("checkpoint.on_write_error=continue");
    Outcome run = run_job(args, dir / "continue", kLimit);
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("File too large"));
    CHECK_THAT(
        run.err,
        Contains("mgtrain: warning: training goes on without that checkpoint (checkpoint.on_write_error: continue)"));
    CHECK(summary_number(run.out, "steps") == 60);
    CHECK(checkpoint_steps(checkpoints).empty());
  }
}

TEST_CASE("keep_last leaves the newest checkpoints and a latest pointer to the newest", "[checkpoint][resume]") {
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string checkpoints = checkpoint_dir(log_dir, "keep");
  Outcome run = run_job(
      job_args(log_dir, "keep", 1, {"train.max_steps=60", "checkpoint.every_steps=10", "checkpoint.keep_last=2"}),
      dir / "keep");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  for (int step = 10; step <= 60; step += 10) {
    CHECK_THAT(run.out, Contains("mgtrain: checkpoint (every_steps) step " + std::to_string(step) + ": "));
  }
  CHECK(names_in(checkpoints) ==
        std::vector<std::string>{checkpoint_file_name(50), checkpoint_file_name(60), "latest"});
  CHECK(read_latest_pointer(checkpoints) == checkpoint_file_name(60));
  CHECK(read_text(checkpoints + "/latest") == checkpoint_file_name(60) + "\n");
}

namespace {

// The launcher's children (its workers), from /proc.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  std::ifstream file("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
  for (pid_t child; file >> child;) children.push_back(child);
  return children;
}

// Whether `pid` has a handler for `signal` (SigCgt in /proc/PID/status).
bool catches_signal(pid_t pid, int signal) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (signal - 1)) & 1U;
  }
  return false;
}

}  // namespace

TEST_CASE("SIGUSR1 during the worker's setup is not lost and does not kill it: it saves at the first step and exits 75",
          "[checkpoint][resume][signals]") {
  TempDir dir;
  const std::string log_dir = dir / "runs";
  const std::string run_dir = log_dir + "/early";
  Launcher launcher(job_args(log_dir, "early", 1), dir / "early");
  // Catch the worker between the start of run_worker and the training loop: it already catches SIGUSR1, and rank 0
  // has not printed its start line yet (that comes once data, model and process group are set up).
  pid_t worker = -1;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (worker < 0 && std::chrono::steady_clock::now() < deadline) {
    for (pid_t child : children_of(launcher.pid)) {
      if (catches_signal(child, SIGUSR1)) worker = child;
    }
    if (worker < 0) std::this_thread::sleep_for(2ms);
  }
  REQUIRE(worker > 0);
  REQUIRE(::kill(worker, SIGSTOP) == 0);  // hold it in setup while we look
  std::this_thread::sleep_for(300ms);     // the launcher drains what the worker wrote so far
  INFO(launcher.out());
  REQUIRE_THAT(launcher.out(), !Contains(" | world "));  // still setting up when the signal arrives
  REQUIRE(::kill(worker, SIGUSR1) == 0);
  REQUIRE(::kill(worker, SIGCONT) == 0);
  const int code = launcher.wait();
  const std::string out = launcher.out(), err = launcher.err();
  INFO(out << err);
  CHECK(code == 75);
  CHECK_THAT(err, Contains("SIGUSR1: saved a checkpoint at step 1 "));
  const auto listing = list_checkpoints(run_dir + "/checkpoints");
  REQUIRE(listing.size() == 1);
  CHECK(listing.back().step == 1);
  CHECK(metadata(listing.back().path, "mgtrain.reason") == "stop requested");
}
