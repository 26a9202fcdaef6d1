// Stack dumps of real running processes (lib/diagnose/stack_dump): a Python program blocked in stuck_here() armed
// by mgtrain's sitecustomize hook (with a user's sitecustomize beside it), a native program
// (stack_dump_target, this folder), a Python program that is not armed or is stopped, and one that cannot answer
// before the deadline. Each dump must leave the process running, and finishing normally afterwards.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "contract/log_layout.hpp"
#include "diagnose/flight_recorder.hpp"
#include "diagnose/python_hook.hpp"
#include "diagnose/rank_diagnosis.hpp"
#include "diagnose/stack_dump.hpp"
#include "diagnose/top_frames.hpp"
#include "integration/launch_fixture.hpp"
#include "support/loop_runner.hpp"

using namespace mgtrain;
using namespace mgtrain::diagnose;
using namespace mgtrain::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

// stuck_here() waits (in short C-level sleeps) until <dir>/release exists; the program then exits 0.
// BLOCK_SIGNAL=1: the stack signal is blocked first, so faulthandler can never answer.
const char* kStuckScript = R"PY(
import os, signal, sys, threading, time
folder = sys.argv[1]
if os.environ.get("BLOCK_SIGNAL") == "1":
    signal.pthread_sigmask(signal.SIG_BLOCK, [int(os.environ["MGTRAIN_STACK_SIGNAL"])])

helper_inside = threading.Event()

def helper_thread_waits():
    helper_inside.set()
    while not os.path.exists(os.path.join(folder, "release")):
        time.sleep(0.02)

def stuck_here():
    helper_inside.wait()
    open(os.path.join(folder, "ready"), "w").close()  # from inside: a dump from now on finds both functions
    while not os.path.exists(os.path.join(folder, "release")):
        time.sleep(0.02)

threading.Thread(target=helper_thread_waits, daemon=True).start()
stuck_here()
print("finished")
)PY";

// The dumps on the launcher's event loop, to their end (each ends by its deadline).
std::vector<DumpResult> dump_stacks_all(const std::vector<DumpTarget>& targets, Clock::time_point deadline,
                                        const DumpOptions& options = {}) {
  LoopRunner runner;
  std::vector<std::unique_ptr<StackDump>> dumps;
  for (const DumpTarget& target : targets) {
    dumps.push_back(std::make_unique<StackDump>(target, deadline, options));
    runner.add(*dumps.back());
  }
  const bool done = runner.run_until(
      [&] { return std::all_of(dumps.begin(), dumps.end(), [](const auto& dump) { return dump->done(); }); }, 60s);
  REQUIRE(done);
  std::vector<DumpResult> results;
  for (const auto& dump : dumps) {
    runner.remove(*dump);
    results.push_back(dump->result());
  }
  return results;
}

DumpResult dump_stacks(const DumpTarget& target, Clock::time_point deadline, const DumpOptions& options = {}) {
  return dump_stacks_all({target}, deadline, options).at(0);
}

bool have_python() { return access(kPython, X_OK) == 0; }
bool have_eu_stack() {
  const char* path = std::getenv("PATH");
  return !find_program("eu-stack", path ? path : "").empty();
}

std::string tool_path(const std::string& name) {
  return (fs::read_symlink("/proc/self/exe").parent_path() / name).string();
}

// The folder of the built-in trainer under test and its launcher: $MGTRAIN_TEST_BIN_DIR (another build's bin/, for
// a build without the worker), else this build's; "" when it has no mgtrain-worker.
std::string worker_bin_dir() {
  const char* chosen = std::getenv("MGTRAIN_TEST_BIN_DIR");
  const std::string dir = chosen && *chosen ? chosen : MGTRAIN_BIN_DIR;
  return access((dir + "/mgtrain-worker").c_str(), X_OK) == 0 ? dir : "";
}

// The live children of `parent` whose executable is named `name`.
std::vector<pid_t> children_named(pid_t parent, const std::string& name) {
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid_text = entry.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    std::error_code error;
    const auto exe = fs::read_symlink(entry.path() / "exe", error);
    if (ppid == parent && state != 'Z' && !error && exe.filename() == name) found.push_back(std::stoi(pid_text));
  }
  return found;
}

struct PythonWorker {
  TempDir dir{"mgtrain-stacks"};
  std::string rank_dir;
  ChildProcess process;

  // armed: started with python_hook_environment; a user's sitecustomize sits on the user's PYTHONPATH.
  explicit PythonWorker(bool armed, bool block_signal = false) {
    rank_dir = dir / "attempt_0/rank_0";
    fs::create_directories(rank_dir);
    fs::create_directories(dir / "user_lib");
    std::ofstream(dir / "user_lib/sitecustomize.py")
        << "open(" << '"' << (dir / "user_site_ran") << '"' << ", 'w').close()\n";
    std::ofstream(dir / "stuck.py") << kStuckScript;
    std::vector<std::pair<std::string, std::string>> env{{"PYTHONPATH", dir / "user_lib"},
                                                         {"BLOCK_SIGNAL", block_signal ? "1" : "0"},
                                                         {"MGTRAIN_STACK_SIGNAL", std::to_string(stack_signal())}};
    if (armed) {
      env.clear();
      env.emplace_back("BLOCK_SIGNAL", block_signal ? "1" : "0");
      const std::string hook = write_python_hook(dir / "python_hook");
      for (const auto& [name, value] : python_hook_environment({{"PYTHONPATH", dir / "user_lib"}}, hook, rank_dir)) {
        env.emplace_back(name, value);
      }
    }
    process = start_process({kPython, dir / "stuck.py", dir.path()}, dir / "python", env);
    REQUIRE(wait_until([&] { return file_exists(dir / "ready"); }, 20s));
  }
  ~PythonWorker() {
    if (process.pid > 0 && !wait_for_exit(process.pid, 0ms)) {
      kill(process.pid, SIGKILL);
      wait_for_exit(process.pid, 5s);
    }
  }
  DumpTarget target(bool armed = true) const {
    return DumpTarget{process.pid, 0, ProgramKind::python, log_layout::stacks_file(rank_dir),
                      armed ? log_layout::faulthandler_file(rank_dir) : ""};
  }
  // Releases stuck_here() and expects the program to end normally: the dump did not stop or kill it.
  void expect_finishes_normally() {
    std::ofstream(dir / "release").close();
    auto code = wait_for_exit(process.pid, 20s);
    process.pid = -1;
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    CHECK(read_text(dir / "python.out").find("finished") != std::string::npos);
  }
};

}  // namespace

TEST_CASE("stacks: a Python worker blocked in stuck_here() is dumped and keeps running", "[stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  PythonWorker worker(true);
  CHECK(file_exists(worker.dir / "user_site_ran"));  // the user's sitecustomize still runs behind the hook
  const auto started = Clock::now();
  DumpResult result = dump_stacks(worker.target(), Clock::now() + 10s);
  INFO(read_text(log_layout::stacks_file(worker.rank_dir)));
  CHECK(result.python_frames);
  CHECK(result.output_path == log_layout::stacks_file(worker.rank_dir));
  const std::string stacks = read_text(log_layout::stacks_file(worker.rank_dir));
  CHECK(stacks.find("in stuck_here") != std::string::npos);
  CHECK(stacks.find("in helper_thread_waits") != std::string::npos);  // every thread
  const auto frames = top_frames(stacks);
  REQUIRE_FALSE(frames.empty());
  CHECK(frames[0].rfind("stuck_here (stuck.py:", 0) == 0);
  if (have_eu_stack()) {
    CHECK(result.outcome == DumpOutcome::complete);
    CHECK(result.native_frames);
    CHECK(stacks.find("_PyEval_EvalFrameDefault") != std::string::npos);  // the interpreter's C frames
  } else {
    WARN("eu-stack not installed: native frames not checked");
  }
  CHECK(std::chrono::duration<double>(Clock::now() - started).count() < 5.0);
  // a second dump works too and holds only the new frames
  DumpResult again = dump_stacks(worker.target(), Clock::now() + 10s);
  CHECK(again.python_frames);
  worker.expect_finishes_normally();
}

TEST_CASE("stacks: a native program names its functions and keeps running", "[stacks]") {
  if (!have_eu_stack()) {
    WARN("skipped: eu-stack not installed (apt install elfutils)");
    return;
  }
  TempDir dir("mgtrain-stacks");
  ChildProcess target = start_process({tool_path("stack_dump_target"), "20"}, dir / "native");
  REQUIRE(wait_until([&] { return read_text(dir / "native.out").find("ready") != std::string::npos; }, 10s));
  DumpResult result =
      dump_stacks(DumpTarget{target.pid, 1, ProgramKind::native, dir / "stacks.txt", ""}, Clock::now() + 10s);
  const std::string stacks = read_text(dir / "stacks.txt");
  INFO(stacks);
  CHECK(result.outcome == DumpOutcome::complete);
  CHECK(stacks.find("stuck_in_native_code") != std::string::npos);
  CHECK(stacks.find("waiting_native_helper") != std::string::npos);
  const auto frames = top_frames(stacks, 8);
  REQUIRE_FALSE(frames.empty());
  CHECK(frames[0].find("stuck_in_native_code") != std::string::npos);  // the main thread first
  CHECK(process_state(target.pid).value_or('Z') != 'T');               // not left stopped
  kill(target.pid, SIGTERM);
  CHECK(wait_for_exit(target.pid, 10s) == std::optional<int>(128 + SIGTERM));  // it was alive until then
}

TEST_CASE("stacks: the built-in trainer's stacks name its training functions", "[stacks]") {
  const std::string bin = worker_bin_dir();
  if (bin.empty() || !have_eu_stack()) {
    WARN("skipped: needs mgtrain-worker (built, or in $MGTRAIN_TEST_BIN_DIR) and eu-stack");
    return;
  }
  TempDir dir("mgtrain-stacks");
  ChildProcess launcher = start_process({bin + "/mgtrain", "launch", "--nproc", "1", "--log-dir", dir / "runs",
                                         std::string(MGTRAIN_SOURCE_DIR) + "/configs/bench/mlp-64.yaml",
                                         "train.max_steps=100000000", "log.every_steps=1"},
                                        dir / "launcher");
  pid_t trainer = -1;
  REQUIRE(wait_until(
      [&] {
        auto found = children_named(launcher.pid, "mgtrain-worker");
        if (!found.empty()) trainer = found[0];
        return trainer > 0 && read_text(dir / "launcher.out").find("step ") != std::string::npos;
      },
      60s));
  // A trainer that is running flat out may be sampled where unwinding stops early (a frame being set up): up to 3
  // samples, each a full dump.
  DumpResult result;
  std::string stacks;
  for (int sample = 0; sample < 3; ++sample) {
    result = dump_stacks(DumpTarget{trainer, 0, ProgramKind::native, dir / "stacks.txt", ""}, Clock::now() + 10s);
    stacks = read_text(dir / "stacks.txt");
    if (stacks.find("mgtrain::run_training(") != std::string::npos) break;
  }
  INFO(stacks);
  CHECK(result.native_frames);
  CHECK(stacks.find("mgtrain::run_training(") != std::string::npos);
  CHECK(stacks.find("mgtrain::run_worker(") != std::string::npos);
  CHECK(process_state(trainer).value_or('Z') != 'T');
  kill(launcher.pid, SIGTERM);  // the trainer, still running, saves nothing (no checkpoint dir) and stops
  CHECK(wait_for_exit(launcher.pid, 30s).has_value());
}

TEST_CASE("stacks: a Python process without the hook is not sent the signal (it would end it)", "[stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  PythonWorker worker(false);
  DumpResult result = dump_stacks(worker.target(false), Clock::now() + 10s, DumpOptions{""});
  CHECK(result.outcome == DumpOutcome::failed);
  CHECK_FALSE(result.python_frames);
  REQUIRE(result.notes.size() == 2);
  CHECK(result.notes[0].find("rank 0 (pid " + std::to_string(worker.process.pid) + "): no Python frames") == 0);
  CHECK(result.notes[0].find("not started with mgtrain's stack-dump hook") != std::string::npos);
  // armed path given, but the process never registered the handler: checked in /proc before sending
  result = dump_stacks(worker.target(true), Clock::now() + 10s, DumpOptions{""});
  CHECK(result.notes[0].find("does not catch the stack signal") != std::string::npos);
  CHECK(read_text(log_layout::stacks_file(worker.rank_dir)).find("== notes ==") != std::string::npos);
  worker.expect_finishes_normally();
}

TEST_CASE("stacks: a process that cannot answer before the deadline gives a note, not a hang", "[stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  PythonWorker worker(true, /*block_signal=*/true);
  const auto started = Clock::now();
  DumpResult result = dump_stacks(worker.target(), started + 1500ms, DumpOptions{""});
  const double took = std::chrono::duration<double>(Clock::now() - started).count();
  CHECK(took < 2.0);
  CHECK(result.outcome == DumpOutcome::failed);
  REQUIRE_FALSE(result.notes.empty());
  CHECK(result.notes[0].find("the stack signal was sent but not handled") != std::string::npos);
  // a deadline already past: eu-stack is not even started
  if (have_eu_stack()) {
    result =
        dump_stacks(DumpTarget{worker.process.pid, 0, ProgramKind::native, worker.dir / "n.txt", ""}, Clock::now());
    REQUIRE(result.notes.size() == 1);
    CHECK(result.notes[0].find("the deadline left no time for eu-stack") != std::string::npos);
  }
  worker.expect_finishes_normally();  // the pending signal is still blocked: no harm done
}

TEST_CASE("stacks: a stopped Python process gets native frames only, and stays stopped", "[stacks]") {
  if (!have_python() || !have_eu_stack()) {
    WARN("skipped: needs " << kPython << " and eu-stack");
    return;
  }
  PythonWorker worker(true);
  kill(worker.process.pid, SIGSTOP);
  REQUIRE(wait_until([&] { return is_stopped_state(process_state(worker.process.pid).value_or('?')); }, 5s));
  const auto started = Clock::now();
  DumpResult result = dump_stacks(worker.target(), Clock::now() + 10s);
  CHECK(std::chrono::duration<double>(Clock::now() - started).count() < 5.0);
  CHECK(result.outcome == DumpOutcome::partial);
  CHECK(result.native_frames);
  CHECK_FALSE(result.python_frames);
  REQUIRE_FALSE(result.notes.empty());
  CHECK(result.notes[0].find("the process is stopped") != std::string::npos);
  CHECK(is_stopped_state(process_state(worker.process.pid).value_or('?')));  // not continued by the dump
  kill(worker.process.pid, SIGCONT);
  worker.expect_finishes_normally();
}

TEST_CASE("stacks: every rank at once, and an ended process", "[stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  PythonWorker first(true), second(true);
  TempDir dir("mgtrain-stacks");
  std::vector<DumpTarget> targets{first.target(), second.target(),
                                  DumpTarget{999999, 7, ProgramKind::native, dir / "gone.txt", ""}};
  targets[1].rank = 1;
  auto results = dump_stacks_all(targets, Clock::now() + 10s);
  REQUIRE(results.size() == 3);
  CHECK(results[0].python_frames);
  CHECK(results[1].python_frames);
  CHECK(read_text(log_layout::stacks_file(second.rank_dir)).find("stacks of rank 1 (pid ") != std::string::npos);
  CHECK(results[2].outcome == DumpOutcome::failed);
  REQUIRE(results[2].notes.size() == 1);
  CHECK(results[2].notes[0] == "rank 7 (pid 999999): no stacks: the process has ended");
  first.expect_finishes_normally();
  second.expect_finishes_normally();
}

TEST_CASE("stacks: a node's diagnosis: stacks, top frames and the flight recorder's dump gathered", "[stacks]") {
  if (!have_python()) {
    WARN("skipped: no " << kPython);
    return;
  }
  PythonWorker worker(true);
  // torch's NCCL monitor thread, stood in for: it holds the debug pipe open and dumps when a byte arrives
  const std::string pipe = worker.rank_dir + "/nccl_trace_rank_0.pipe";
  REQUIRE(mkfifo(pipe.c_str(), 0600) == 0);
  const int reader = open(pipe.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(reader >= 0);
  std::thread torch([&] {
    char byte = 0;
    for (int i = 0; i < 400 && read(reader, &byte, 1) != 1; ++i) std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(200ms);  // torch dumps a moment later
    std::ofstream(worker.rank_dir + "/nccl_trace_rank_0") << "pickled trace";
  });
  const auto started = Clock::now();
  RankDiagnosisRun run({RankProcess{0, worker.process.pid, ProgramKind::python, worker.rank_dir, true}},
                       worker.dir / "attempt_0", Clock::now() + 8s, /*flight_recorder=*/true, /*stacks_number=*/0);
  LoopRunner runner;
  runner.add(run);
  REQUIRE(runner.run_until([&] { return run.done(); }, 30s));
  runner.remove(run);
  const NodeDiagnosis& diagnosis = run.result();
  torch.join();
  close(reader);
  CHECK(std::chrono::duration<double>(Clock::now() - started).count() < 5.0);
  REQUIRE(diagnosis.ranks.size() == 1);
  CHECK(diagnosis.ranks[0].dump.python_frames);
  REQUIRE_FALSE(diagnosis.ranks[0].dump.top_frames.empty());
  CHECK(diagnosis.ranks[0].dump.top_frames[0].rfind("stuck_here (stuck.py:", 0) == 0);
  CHECK(diagnosis.ranks[0].flight_recorder_files == std::vector<std::string>{worker.rank_dir + "/nccl_trace_rank_0"});
  CHECK(diagnosis.flight_recorder_folder == worker.dir / "attempt_0/flight_recorder");
  CHECK(read_text(worker.dir / "attempt_0/flight_recorder/nccl_trace_rank_0") == "pickled trace");
  worker.expect_finishes_normally();
}
