// Snapshots in memory end to end with real processes (docs/checkpoints.md#snapshots-in-memory): the `mgtrain`
// launcher keeps one store per local rank across restarts; the built-in trainer (2 workers, gloo on CPU,
// checkpoint_jobs.hpp's job) writes a snapshot every 5 steps. A worker SIGKILLed mid-step resumes from the newest
// snapshot, not from the last file, and the run ends bit-identical to an uninterrupted one; workers killed while
// writing a snapshot resume from the previous slot; a damaged snapshot is skipped with its reason, and the next
// source is used: the copy of the rank that still holds it, or the newest file. Python workers: the helper
// share/mgtrain/python/mgtrain_snapshot.py on a store of its own (snapshot_helper_check.py), and the DDP tutorial
// (examples/ddp_snapshot/train.py) with a rank SIGKILLed, under the torch 2.x venv's Python.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "checkpoint/snapshot_store.hpp"
#include "checkpoint_jobs/checkpoint_jobs.hpp"
#include "contract/heartbeat_line.hpp"
#include "integration/launch_fixture.hpp"
#include "support/summary_line.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kBin = MGTRAIN_BIN_DIR;
constexpr int kSnapshotEvery = 5;

const std::string kOwnCopies = "mgtrain: resumed from the snapshot in memory (each rank's own copy): step ";

// The step of the one "resumed from ..." line of `output` that starts with `prefix`, or -1.
int resumed_step(const std::string& output, const std::string& prefix) {
  const std::vector<std::string> lines = resume_lines(output);
  if (lines.size() != 1) return -1;
  const std::size_t at = lines[0].find(prefix);
  return at == std::string::npos ? -1 : std::atoi(lines[0].c_str() + at + prefix.size());
}

// The value of `name` in a process's environment, or "".
std::string environment_value(pid_t pid, const std::string& name) {
  std::string environ = read_text("/proc/" + std::to_string(pid) + "/environ");
  for (char& c : environ)
    if (c == '\0') c = '\n';
  for (const std::string& line : split_lines(environ)) {
    if (line.rfind(name + "=", 0) == 0) return line.substr(name.size() + 1);
  }
  return "";
}

// Flips a byte in the middle of the newest complete snapshot in `worker`'s store (opened through /proc, as any
// process of the same user can); returns its step.
std::int64_t damage_newest_snapshot(pid_t worker) {
  const std::string fd_number = environment_value(worker, "MGTRAIN_SNAPSHOT_FD");
  REQUIRE_FALSE(fd_number.empty());
  const std::string path = "/proc/" + std::to_string(worker) + "/fd/" + fd_number;
  Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(fd);
  SnapshotStore store(fd.get(), path);
  std::vector<std::string> skipped;
  const std::optional<SnapshotStore::Snapshot> newest = store.newest(skipped);
  REQUIRE(newest);
  const auto at = static_cast<off_t>(newest->offset + newest->image.file_size() / 2);
  unsigned char byte = 0;
  REQUIRE(::pread(fd.get(), &byte, 1, at) == 1);
  byte ^= 0x10;
  REQUIRE(::pwrite(fd.get(), &byte, 1, at) == 1);
  return newest->step;
}

// Starts the job with every rank pausing in the middle of writing the snapshot of step 50 (the first attempt only),
// and waits until both ranks are there and rank 0's checkpoint writer has finished the file of step 40 (it writes in
// the background: on a busy machine it can still be at it while training pauses at step 50).
std::map<int, pid_t> paused_mid_snapshot(Launcher& launcher, const std::string& run_dir) {
  const bool paused = wait_until(
      [&] {
        const std::string out = read_text(run_dir + "/attempt_0/rank_0/stdout.log");
        if (out.find("mgtrain: checkpoint (every_steps) step 40: ") == std::string::npos) return false;
        for (int rank = 0; rank < 2; ++rank) {
          const std::string log = read_text(run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/stderr.log");
          if (log.find("mgtrain-test: snapshot write paused at step 50") == std::string::npos) return false;
        }
        return true;
      },
      60s);
  INFO(launcher.out() << launcher.err());
  REQUIRE(paused);
  const std::map<int, pid_t> workers = worker_pids(launcher.pid);
  REQUIRE(workers.size() == 2);
  return workers;
}

const std::vector<std::pair<std::string, std::string>> kPauseAt50 = {{"MGTRAIN_TEST_SNAPSHOT_PAUSE_AT_STEP", "50"}};

std::vector<std::string> snapshot_job(const std::string& log_dir, const std::string& run_id) {
  // --hang-timeout (longer than any case) gives the workers their progress files, which say where each run started.
  return job_args(
      log_dir, run_id, 2,
      {"--max-restarts", "1", "--hang-timeout", "600", "checkpoint.snapshot_every=" + std::to_string(kSnapshotEvery)});
}

// The snapshot job with both ranks stopped in the middle of writing the snapshot of step 50 (the first attempt only).
struct PausedJob {
  TempDir dir;
  std::string run_dir;
  Launcher launcher;
  std::map<int, pid_t> workers;  // by rank

  explicit PausedJob(const std::string& id)
      : run_dir(dir / "runs" + "/" + id),
        launcher(snapshot_job(dir / "runs", id), dir / id, std::nullopt, kPauseAt50),
        workers(paused_mid_snapshot(launcher, run_dir)) {}

  // SIGKILLs both workers (rank 1 first); the launcher's exit code once the restarted job has ended.
  int kill_and_wait() {
    for (auto it = workers.rbegin(); it != workers.rend(); ++it) REQUIRE(::kill(it->second, SIGKILL) == 0);
    return launcher.wait();
  }
};

}  // namespace

TEST_CASE("the launcher hands each worker a store of its own and keeps it across restarts", "[snapshot][launch]") {
  TempDir dir;
  // Each attempt appends a line to its store through /proc (a new open file description: from the start, >>);
  // the second attempt prints what the first wrote, then succeeds. In the first, rank 0 fails once rank 1 wrote.
  const std::string script = write_script(dir / "worker.sh", R"(
store=/proc/self/fd/$MGTRAIN_SNAPSHOT_FD
readlink "$store" | sed "s/^/rank $RANK link: /"
echo "attempt $TORCHELASTIC_RESTART_COUNT of rank $RANK" >> "$store"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  touch ")" + std::string(dir / "wrote-") + R"($RANK"
  while [ ! -e ")" + std::string(dir / "wrote-1") + R"(" ]; do sleep 0.05; done
  [ "$RANK" = 0 ] && exit 3
  sleep 60
fi
sed "s/^/rank $RANK store: /" "$store"
)");
  const Outcome run = run_job({kBin + "/mgtrain", "launch", "--nproc", "2", "--max-restarts", "1", "--log-dir",
                               dir / "runs", "--", "sh", script},
                              dir / "store");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    CHECK_THAT(run.out, Contains("rank " + r + " link: /memfd:mgtrain-snapshots-local-rank-" + r));
    CHECK_THAT(run.out, Contains("rank " + r + " store: attempt 0 of rank " + r));
    CHECK_THAT(run.out, Contains("rank " + r + " store: attempt 1 of rank " + r));
  }
}

TEST_CASE("a worker SIGKILLed mid-step resumes from the newest snapshot in memory and ends bit-identical",
          "[snapshot][resume][restart]") {
  const Reference& ref = reference();
  std::mt19937 random = seeded_random();
  // Between two files (every 40 steps), at least two snapshots after the last one.
  int kill_after_step =
      40 * std::uniform_int_distribution<int>(1, 3)(random) + std::uniform_int_distribution<int>(12, 30)(random);
  const int victim = std::uniform_int_distribution<int>(0, 1)(random);
  UNSCOPED_INFO("SIGKILL to rank " << victim << " once rank 0 logged step " << kill_after_step);

  std::optional<TempDir> dir;
  std::string run_dir, out, err;
  int code = -1, reached = kSteps;
  // As in test_checkpoint_resume.cpp: a kill that lands after the last step (a busy machine) is tried again.
  for (int attempt = 0; attempt < 3 && reached >= kSteps; ++attempt) {
    dir.emplace();
    const std::string log_dir = *dir / "runs";
    run_dir = log_dir + "/m";
    Launcher launcher(snapshot_job(log_dir, "m"), *dir / "m");
    const std::string rank0_log = run_dir + "/attempt_0/rank_0/stdout.log";
    const bool ready = wait_until([&] { return last_logged_step(read_text(rank0_log)) >= kill_after_step; }, 60s);
    INFO(launcher.out() << launcher.err());
    REQUIRE(ready);
    const std::map<int, pid_t> workers = worker_pids(launcher.pid);
    REQUIRE(workers.size() == 2);
    REQUIRE(::kill(workers.at(victim), SIGKILL) == 0);
    code = launcher.wait();
    out = launcher.out();
    err = launcher.err();
    reached = last_logged_step(read_text(rank0_log));
    if (reached >= kSteps) {
      WARN("the kill after step " << kill_after_step << " came after the last step; trying again at step 52");
      kill_after_step = 52;
    }
  }
  INFO(out << err);
  REQUIRE(code == 0);
  const std::string attempt1 = read_text(run_dir + "/attempt_1/rank_0/stdout.log");
  // Each rank's own copy, or, when the kill landed while the victim wrote a snapshot, the other rank's.
  std::smatch m;
  REQUIRE(
      std::regex_search(attempt1, m,
                        std::regex(R"(mgtrain: resumed from the snapshot in memory (\(each rank's own copy\)|of rank )"
                                   R"([01] \(sent to the ranks that lack it\)): step ([0-9]+),)")));
  const int resumed = std::stoi(m[2].str());
  UNSCOPED_INFO("attempt 0 reached step " << reached << ", attempt 1 resumed at step " << resumed);
  // The newest snapshot rank 0 had written when it logged its last step (it logs a step after its snapshot), or one
  // later: never the last file's step unless that is also the newest snapshot.
  CHECK(resumed % kSnapshotEvery == 0);
  CHECK(resumed >= reached / kSnapshotEvery * kSnapshotEvery);
  CHECK(resumed <= reached + kSnapshotEvery);
  CHECK(reached - resumed < kEvery);
  if (resumed % kEvery != 0) CHECK_THAT(attempt1, Contains("is newer than"));
  CHECK_THAT(attempt1, Contains("mgtrain: step " + std::to_string(resumed + 1) + "/240 "));
  const nlohmann::json record = nlohmann::json::parse(read_text(run_dir + "/run.json"));
  REQUIRE(record.contains("resumes"));
  CHECK(record["resumes"].back()["step"] == resumed);
  CHECK(record["resumes"].back()["from"] == "snapshot");
  CHECK(summary_number(out, "steps") == kSteps);
  check_same_training_state(ref.final_checkpoint, checkpoint_path(run_dir + "/checkpoints", kSteps));
}

TEST_CASE("workers killed while writing a snapshot resume from the previous one", "[snapshot][resume][restart]") {
  const Reference& ref = reference();
  PausedJob job("torn");
  const std::string& run_dir = job.run_dir;
  const int code = job.kill_and_wait();
  const std::string out = job.launcher.out(), err = job.launcher.err();
  INFO(out << err);
  REQUIRE(code == 0);
  // Step 50's slot was never marked complete: every rank still holds step 45, newer than the file of step 40.
  const std::string attempt1 = read_text(run_dir + "/attempt_1/rank_0/stdout.log");
  CHECK(resumed_step(attempt1, kOwnCopies) == 45);
  CHECK_THAT(attempt1, Contains("the snapshot in memory (step 45) is newer than " +
                                checkpoint_path(run_dir + "/checkpoints", 40) + " (step 40): resuming from memory"));
  // The progress files say it too (the launcher's /status and run.json read them): where each run started, from
  // which copy, and the newest snapshot each rank holds.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string rank_dir = "/rank_" + std::to_string(rank) + "/heartbeat";
    const std::optional<HeartbeatInfo> first = parse_heartbeat_line(read_text(run_dir + "/attempt_0" + rank_dir));
    const std::optional<HeartbeatInfo> second = parse_heartbeat_line(read_text(run_dir + "/attempt_1" + rank_dir));
    REQUIRE(first);
    REQUIRE(second);
    CHECK(first->start_step == 0);
    CHECK(first->start_source == StartSource::kNone);
    CHECK(first->snapshot_step == 45);  // step 50's never completed
    CHECK(second->start_step == 45);
    CHECK(second->start_source == StartSource::kSnapshot);
    CHECK(second->snapshot_step == kSteps);
    REQUIRE(first->snapshot_time);
    REQUIRE(second->snapshot_time);
    CHECK(*second->snapshot_time > *first->snapshot_time);
  }
  // run.json: the restart and where it started.
  const nlohmann::json record = nlohmann::json::parse(read_text(run_dir + "/run.json"));
  REQUIRE(record.contains("resumes"));
  REQUIRE(record["resumes"].size() == 1);
  CHECK(record["resumes"][0]["attempt"] == 1);
  CHECK(record["resumes"][0]["step"] == 45);
  CHECK(record["resumes"][0]["from"] == "snapshot");
  CHECK(summary_number(out, "steps") == kSteps);
  check_same_training_state(ref.final_checkpoint, checkpoint_path(run_dir + "/checkpoints", kSteps));
}

TEST_CASE("a damaged snapshot is skipped with its reason and the next source is used", "[snapshot][resume][corrupt]") {
  const Reference& ref = reference();
  PausedJob job("damaged");
  const std::string& run_dir = job.run_dir;
  const Launcher& launcher = job.launcher;
  const std::map<int, pid_t>& workers = job.workers;
  const std::string attempt1_log = run_dir + "/attempt_1/rank_0/stdout.log";
  const std::string skipped = "mgtrain: warning: skipping damaged snapshot: the snapshot store of rank ";

  SECTION("one rank's copy: the other rank's is sent to it") {
    CHECK(damage_newest_snapshot(workers.at(1)) == 45);
    const int code = job.kill_and_wait();
    INFO(launcher.out() << launcher.err());
    REQUIRE(code == 0);
    const std::string attempt1 = read_text(attempt1_log);
    const std::string rank1_err = read_text(run_dir + "/attempt_1/rank_1/stderr.log");
    CHECK_THAT(rank1_err, Contains(skipped + "1"));
    CHECK_THAT(rank1_err, Contains("(step 45): checksum mismatch"));
    CHECK(resumed_step(attempt1,
                       "resumed from the snapshot in memory of rank 0 (sent to the ranks that lack it): "
                       "step ") == 45);
    CHECK(summary_number(launcher.out(), "steps") == kSteps);
  }
  SECTION("every rank's copy: the file of step 40") {
    CHECK(damage_newest_snapshot(workers.at(0)) == 45);
    CHECK(damage_newest_snapshot(workers.at(1)) == 45);
    const int code = job.kill_and_wait();
    INFO(launcher.out() << launcher.err());
    REQUIRE(code == 0);
    const std::string attempt1 = read_text(attempt1_log);
    CHECK_THAT(read_text(run_dir + "/attempt_1/rank_0/stderr.log"), Contains(skipped + "0"));
    // The older slot (step 40) was being rewritten for step 50: no snapshot is left, so the file is used.
    const std::string file = checkpoint_path(run_dir + "/checkpoints", 40);
    CHECK(resume_lines(attempt1).size() == 1);
    CHECK_THAT(attempt1, Contains(resumed_line_for(file, 40)));
    CHECK(summary_number(launcher.out(), "steps") == kSteps);
  }
  check_same_training_state(ref.final_checkpoint, checkpoint_path(run_dir + "/checkpoints", kSteps));
}

namespace {

// The torch 2.x venv's Python (scripts/torch2-env.sh), or "" when it is not there.
std::string venv_python() {
  const std::string python = std::string(MGTRAIN_TORCH2_VENV) + "/bin/python";
  return ::access(python.c_str(), X_OK) == 0 ? python : "";
}

const std::string kHelperDir = std::string(MGTRAIN_SOURCE_DIR) + "/share/mgtrain/python";
const std::string kChecks = std::string(MGTRAIN_SOURCE_DIR) + "/tests/checkpoint_jobs/";

// `name`: the venv's Python; without the venv the case is skipped, saying why.
#define VENV_PYTHON_OR_SKIP(name)                                                                      \
  const std::string name = venv_python();                                                              \
  if (name.empty()) {                                                                                  \
    WARN("SKIP: no torch 2.x venv at " << MGTRAIN_TORCH2_VENV << " (scripts/torch2-env.sh makes it)"); \
    return;                                                                                            \
  }

}  // namespace

TEST_CASE("Python: mgtrain_snapshot.py saves, skips a cut or damaged snapshot, and refuses a non-store",
          "[snapshot][python]") {
  VENV_PYTHON_OR_SKIP(python);
  TempDir dir;
  const Outcome run = run_job({python, kChecks + "snapshot_helper_check.py", kHelperDir}, dir / "helper");
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.out, Contains("snapshot helper: ok"));
}

TEST_CASE("Python: load() gives the newest step every rank holds, load(shared=True) the newest any rank holds, sent",
          "[snapshot][python]") {
  VENV_PYTHON_OR_SKIP(python);
  TempDir dir;
  const Outcome run = run_job({kBin + "/mgtrain", "launch", "--nproc", "2", "--log-dir", dir / "runs", "--", python,
                               kChecks + "snapshot_shared_check.py", kHelperDir},
                              dir / "shared");
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.out, Contains("snapshot shared: ok"));
  CHECK_THAT(run.err, Contains("resuming every rank from the snapshot of rank 0 (step 20): sent to the ranks that "
                               "lack it"));
  CHECK_THAT(run.err, Contains("resuming rank 1 from its replica on rank 0's node (step 30)"));
}

TEST_CASE("Python: the DDP tutorial with a rank SIGKILLed resumes from memory and ends bit-identical",
          "[snapshot][python][restart]") {
  VENV_PYTHON_OR_SKIP(python);
  TempDir dir;
  const std::string script = std::string(MGTRAIN_SOURCE_DIR) + "/examples/ddp_snapshot/train.py";
  const std::vector<std::pair<std::string, std::string>> env = {{"PYTHONPATH", kHelperDir}};
  auto job = [&](const std::string& id, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        kBin + "/mgtrain", "launch", "--nproc", "2",    "--max-restarts", "1",       "--log-dir", dir / "runs",
        "--run-id",        id,       "--",      python, script,           "--steps", "300"};
    args.insert(args.end(), extra.begin(), extra.end());
    Launcher launcher(args, dir / id, std::nullopt, env);
    Outcome outcome;
    outcome.exit_code = launcher.wait(180s);
    outcome.out = launcher.out();
    outcome.err = launcher.err();
    return outcome;
  };
  const Outcome whole = job("whole", {});
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);
  // Rank 1 of the first attempt kills itself after step 137: the snapshots every 10 steps leave step 130.
  const Outcome killed = job("killed", {"--kill-at", "137"});
  INFO(killed.out << killed.err);
  REQUIRE(killed.exit_code == 0);
  CHECK_THAT(killed.err, Contains("restarting all workers (attempt 2 of 2) after local rank 1 signal SIGKILL"));
  CHECK_THAT(killed.out, Contains("[rank 0] resumed from the snapshot in memory at step 130"));
  const auto final_line = [](const std::string& out) {
    const std::size_t at = out.find("final step 300 parameters sha256 ");
    return at == std::string::npos ? std::string("<none>") : out.substr(at, out.find('\n', at) - at);
  };
  CHECK(final_line(killed.out) == final_line(whole.out));
  CHECK(final_line(whole.out) != "<none>");
}
