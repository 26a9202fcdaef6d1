// Helpers of the checkpoint tests that run real training jobs (test_checkpoint_resume.cpp, test_snapshot_resume.cpp):
// the `mgtrain` launcher running the built-in trainer as a process of its own, the job they all start from, what its
// output and checkpoints say, and the uninterrupted reference run they compare against.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/temp_dir.hpp"

namespace mgtrain::testing {

// The job every test starts from: configs/bench/mlp-64.yaml with checkpoints in their default place, 4096 samples
// (64 steps per epoch at world 2, so step 240 is mid-epoch 4), a checkpoint every 40 steps and none by epoch, all of
// them kept, a progress line every step (the tests watch it).
constexpr int kSteps = 240;
constexpr int kEvery = 40;
std::vector<std::string> job_args(const std::string& log_dir, const std::string& run_id, int nproc,
                                  const std::vector<std::string>& extra = {});

std::string checkpoint_dir(const std::string& log_dir, const std::string& run_id);
std::string checkpoint_path(const std::string& dir, std::int64_t step);

// A launcher process with stdout and stderr in files; OMP_NUM_THREADS=1 and `extra_env`; optionally RLIMIT_FSIZE.
// Killed (with its workers) when the test ends before it did.
struct Launcher {
  pid_t pid = -1;
  std::string out_path, err_path;
  std::optional<int> exit_code;

  Launcher(const std::vector<std::string>& argv, const std::string& output_prefix,
           std::optional<rlim_t> file_size_limit = std::nullopt,
           const std::vector<std::pair<std::string, std::string>>& extra_env = {});
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;
  // Its exit code; a launcher still running after `timeout` fails the test.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(90));
  std::string out() const;
  std::string err() const;
};

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};
Outcome run_job(const std::vector<std::string>& args, const std::string& output_prefix,
                std::optional<rlim_t> file_size_limit = std::nullopt);

// The step of the last "mgtrain: step N/M" progress line in `text`, or -1.
int last_logged_step(const std::string& text);
// The "mgtrain: resumed from PATH: step N" lines of `output`, and the start of one.
std::vector<std::string> resume_lines(const std::string& output);
std::string resumed_line_for(const std::string& path, std::int64_t step);
std::vector<std::int64_t> checkpoint_steps(const std::string& dir);
// A checkpoint file's metadata value, or "<missing>".
std::string metadata(const std::string& path, const std::string& key);

// Every tensor of `a` whose name starts with one of `prefixes` equals `b`'s byte for byte (dtype and shape too),
// and `b` has no such tensor that `a` lacks. Returns how many tensors were compared.
std::size_t check_same_tensors(const std::string& a_path, const std::string& b_path,
                               const std::vector<std::string>& prefixes);
// Model parameters and optimizer state (and every rank's RNG) of two checkpoints are bit-identical.
void check_same_training_state(const std::string& a_path, const std::string& b_path);

// The live mgtrain-worker processes started by the launcher `launcher`, by global rank.
std::map<int, pid_t> worker_pids(pid_t launcher);

// A random generator whose seed is printed with any failure and can be fixed with MGTRAIN_TEST_SEED.
std::mt19937 seeded_random();

// The uninterrupted reference run: world 2, kSteps steps, a checkpoint every kEvery steps (all kept).
// Run once per test process and shared by the tests that compare against it or copy its checkpoints.
struct Reference {
  TempDir dir;
  std::string checkpoints;
  std::string final_checkpoint;
  std::string out;
};
const Reference& reference();

// Copies the reference run's checkpoints of `steps` into `dir` (created).
void copy_reference_checkpoints(const std::string& dir, const std::vector<std::int64_t>& steps);

// Flips one bit of the byte at `offset` of a file.
void flip_byte(const std::string& path, std::uint64_t offset);

}  // namespace mgtrain::testing
