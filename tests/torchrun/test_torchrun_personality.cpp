// The torchrun personality as a process: the mgtrain binary called through a `torchrun` symlink, its exit codes,
// MASTER_ADDR, nproc auto on CPUs, signals to the launcher (exit status, no orphans), no ./runs, and the launcher's
// TORCHELASTIC_ERROR_FILE as torchrun 2.15 writes it. Each case says what torchrun does; the side-by-side suite
// against the real torchrun is another file. Workers are /bin/sh scripts (--no-python).
#include <catch2/catch.hpp>

#include <pty.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <set>
#include <thread>

#include "integration/launch_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// A TempDir with a `torchrun` symlink to the mgtrain under test, a working directory `work` and $TMPDIR inside it,
// so the personality's temporary logs stay in the test's directory.
struct TorchrunDir {
  TempDir dir{"mgtrain-torchrun"};
  std::string torchrun = dir / "torchrun";
  std::string work = dir / "work";
  TorchrunDir() {
    std::filesystem::create_symlink(kMgtrain, torchrun);
    std::filesystem::create_directory(work);
  }
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const {
    extra.emplace("TMPDIR", dir.path());
    return extra;
  }
};

CapturedRun run_torchrun(const TorchrunDir& t, std::vector<std::string> args,
                         std::map<std::string, std::string> extra_env = {}) {
  args.insert(args.begin(), t.torchrun);
  CaptureOptions options;
  options.working_directory = t.work;
  options.set_env = t.env(std::move(extra_env));
  options.unset_env = {"TORCHELASTIC_ERROR_FILE", "MGTRAIN_LAUNCH_LOG_DIR", "SLURM_JOB_ID"};
  options.timeout_s = 50;
  options.own_process_group = true;
  return run_and_capture(args, options);
}

// How a started launcher ended: its exit code, or the signal that killed it.
struct Ending {
  bool signaled = false;
  int value = 0;
};

std::optional<Ending> wait_for_ending(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFSIGNALED(status) ? Ending{true, WTERMSIG(status)} : Ending{false, WEXITSTATUS(status)};
    }
    std::this_thread::sleep_for(5ms);
  }
  return std::nullopt;
}

// Two workers that record their process group and wait; `traps` runs first. The launcher runs in `work`.
ChildProcess start_sleeping_job(const TorchrunDir& t, const std::string& traps,
                                const std::vector<std::string>& extra_args = {}) {
  const std::string worker =
      write_script(t.dir / "worker.sh", traps +
                                            "\necho $$ > \"$1/pgid_$RANK.tmp\" && mv \"$1/pgid_$RANK.tmp\" "
                                            "\"$1/pgid_$RANK\"\nsleep 30 &\nwait\nwait");
  std::vector<std::string> argv = {"/bin/sh",          "-c", "cd \"$0\" && exec \"$@\"", t.work, t.torchrun,
                                   "--nproc-per-node", "2",  "--shutdown-timeout",       "2"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  argv.insert(argv.end(), {"--no-python", worker, t.dir.path()});
  ChildProcess launcher = start_process(argv, t.dir / "launcher",
                                        {{"TMPDIR", t.dir.path()}, {"TORCHELASTIC_ERROR_FILE", t.dir / "le.json"}});
  const bool ready = wait_until([&] { return file_exists(t.dir / "pgid_0") && file_exists(t.dir / "pgid_1"); }, 15s);
  if (!ready) {
    kill(launcher.pid, SIGKILL);
    wait_for_ending(launcher.pid, 5s);
    FAIL("workers did not start; launcher stderr: " << read_text(launcher.err_path));
  }
  return launcher;
}

std::set<pid_t> worker_groups(const TorchrunDir& t) {
  std::set<pid_t> groups;
  for (const char* name : {"pgid_0", "pgid_1"}) groups.insert(static_cast<pid_t>(std::stol(read_text(t.dir / name))));
  return groups;
}

void require_no_worker_left(const TorchrunDir& t, const std::set<pid_t>& groups) {
  const bool gone = wait_until([&] { return live_job_processes(groups, t.dir / "worker.sh").empty(); }, 5s);
  if (!gone) {
    for (pid_t pid : live_job_processes(groups, t.dir / "worker.sh")) kill(pid, SIGKILL);
    FAIL("workers outlived the launcher");
  }
}

// The lines of `text` (without '\r'), and whether each fits in `width` columns unless it is one word.
std::vector<std::string> help_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (auto& line : split_lines(text)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

void check_lines_fit(const std::string& text, std::size_t width) {
  for (const auto& line : help_lines(text)) {
    if (line.size() <= width) continue;
    INFO("over " << width << " columns: " << line);
    CHECK(line.substr(line.find_first_not_of(' ')).find(' ') == std::string::npos);
  }
}

// `argv` with stdout on a pseudo-terminal `columns` wide and COLUMNS unset: what it printed there.
std::string run_on_terminal(const std::vector<std::string>& argv, unsigned short columns) {
  winsize size{};
  size.ws_row = 24;
  size.ws_col = columns;
  int master = -1;
  int slave = -1;
  REQUIRE(openpty(&master, &slave, nullptr, nullptr, &size) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(slave, STDOUT_FILENO);
    close(master);
    close(slave);
    unsetenv("COLUMNS");
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(slave);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(master, buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
  close(master);  // read ends with EIO once the child has closed the terminal
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  return out;
}

}  // namespace

TEST_CASE("torchrun personality: --help is torchrun's, wrapped to COLUMNS or the terminal, errors name its flags",
          "[torchrun]") {
  TorchrunDir t;
  // Through a `torchrun` link, stdout a pipe: COLUMNS, else 80.
  CapturedRun help = run_torchrun(t, {"--help"}, {{"COLUMNS", "60"}});
  REQUIRE(help.exit_code == 0);
  auto lines = help_lines(help.out);
  REQUIRE(lines.size() > 30);
  CHECK(lines[0] == "usage: torchrun [-h] [--nnodes NNODES]");
  CHECK_THAT(help.out, Catch::Contains("training_script ...\n"));
  CHECK_THAT(help.out, Catch::Contains("\npositional arguments:\n  training_script "));
  CHECK_THAT(help.out, Catch::Contains("--nproc-per-node NPROC_PER_NODE,"));
  CHECK_THAT(help.out, Catch::Contains("(default: 1:1)"));
  CHECK_THAT(help.out, !Catch::Contains("mgtrain launch [OPTIONS]"));
  check_lines_fit(help.out, 60);
  CaptureOptions plain;
  plain.unset_env = {"COLUMNS"};
  plain.working_directory = t.work;
  CapturedRun eighty = run_and_capture({t.torchrun, "-h"}, plain);
  CHECK(help_lines(eighty.out)[0] == "usage: torchrun [-h] [--nnodes NNODES] [--nproc-per-node NPROC_PER_NODE]");
  check_lines_fit(eighty.out, 80);
  // `mgtrain torchrun --help` names itself so.
  CapturedRun through_mgtrain = run_and_capture({kMgtrain, "torchrun", "--help"}, plain);
  CHECK(help_lines(through_mgtrain.out)[0].rfind("usage: mgtrain torchrun [-h] [--nnodes NNODES]", 0) == 0);
  // On a terminal without COLUMNS: its width.
  const std::string terminal = run_on_terminal({t.torchrun, "--help"}, 70);
  CHECK(help_lines(terminal)[0] == "usage: torchrun [-h] [--nnodes NNODES]");
  check_lines_fit(terminal, 70);
  const std::string launch = run_on_terminal({kMgtrain, "launch", "--help"}, 70);
  CHECK_THAT(launch, Catch::Contains("Usage: mgtrain launch [OPTIONS]"));
  check_lines_fit(launch, 70);
  // Errors name torchrun's flag and help, exit 2 as argparse.
  CapturedRun typo = run_torchrun(t, {"--nprocs", "2", "train.py"});
  CHECK(typo.exit_code == 2);
  CHECK(typo.err ==
        "torchrun: error: unknown flag --nprocs (did you mean --nproc-per-node?)\nRun 'torchrun --help' for the "
        "flags.\n");
  CapturedRun typo_mgtrain = run_and_capture({kMgtrain, "torchrun", "--nprocs", "2", "train.py"}, plain);
  CHECK(typo_mgtrain.exit_code == 2);
  CHECK_THAT(typo_mgtrain.err, Catch::Contains("did you mean --nproc-per-node?"));
  CHECK_THAT(typo_mgtrain.err, Catch::Contains("Run 'mgtrain torchrun --help'"));
}

TEST_CASE("torchrun personality: exit 0, 1 for a failed worker, 2 for a command line that does not parse",
          "[torchrun]") {
  TorchrunDir t;
  const std::string ok = write_script(t.dir / "ok.sh", "exit 0");
  const std::string fails = write_script(t.dir / "fails.sh", "exit 7");
  CHECK(run_torchrun(t, {"--nproc-per-node", "2", "--no-python", ok}).exit_code == 0);
  CapturedRun failed = run_torchrun(t, {"--nproc-per-node", "2", "--no-python", fails});
  CHECK(failed.exit_code == 1);  // torchrun: 1 whatever the worker's code (mgtrain launch: 7)
  CHECK(run_torchrun(t, {"--no-such-flag", "--no-python", ok}).exit_code == 2);
  // `mgtrain torchrun ARGS` is the same personality.
  CaptureOptions options;
  options.working_directory = t.work;
  options.set_env = t.env();
  CHECK(run_and_capture({kMgtrain, "torchrun", "--nproc-per-node", "2", "--no-python", fails}, options).exit_code == 1);
  CHECK_FALSE(std::filesystem::exists(t.work + "/runs"));
}

TEST_CASE("torchrun personality: a worker's exit 2 is restarted, as torchrun does (mgtrain launch does not)",
          "[torchrun]") {
  TorchrunDir t;
  const std::string worker =
      write_script(t.dir / "bad_input.sh", "echo started >> \"" + t.dir / "starts" + "\"; exit 2");
  CapturedRun run = run_torchrun(t, {"--nproc-per-node", "1", "--max-restarts", "1", "--no-python", worker});
  INFO(run.err);
  CHECK(run.exit_code == 1);
  CHECK(read_text(t.dir / "starts") == "started\nstarted\n");
  CHECK_THAT(run.err, !Catch::Contains("bad input"));
}

TEST_CASE("torchrun personality: MASTER_ADDR is localhost on one node, --master-addr with --master-port is kept",
          "[torchrun]") {
  TorchrunDir t;
  const std::string show = write_script(t.dir / "show.sh", "echo \"addr=$MASTER_ADDR port=$MASTER_PORT\"");
  CapturedRun single = run_torchrun(t, {"--no-python", show});
  REQUIRE(single.exit_code == 0);
  CHECK_THAT(single.out, Catch::Contains("addr=localhost port="));
  CHECK_THAT(single.out, !Catch::Contains("port=0"));
  // torchrun ignores --master-addr without --master-port on one node (run(): c10d on localhost:0).
  CHECK_THAT(run_torchrun(t, {"--master-addr", "127.0.0.2", "--no-python", show}).out,
             Catch::Contains("addr=localhost"));
  CHECK_THAT(run_torchrun(t, {"--standalone", "--no-python", show}).out, Catch::Contains("addr=localhost"));
  const std::string port = std::to_string(free_port());
  CHECK_THAT(run_torchrun(t, {"--master-addr", "127.0.0.2", "--master-port", port, "--no-python", show}).out,
             Catch::Contains("addr=127.0.0.2 port=" + port));
}

TEST_CASE("torchrun personality: nproc auto without a GPU starts one worker per CPU", "[torchrun]") {
  if (std::filesystem::exists("/proc/driver/nvidia/gpus") || std::filesystem::exists("/dev/nvidia0")) {
    SUCCEED("a GPU machine: auto counts GPUs there (tests/supervise covers the rule)");
    return;
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  REQUIRE(sched_getaffinity(0, sizeof cpus, &cpus) == 0);
  const int expected = CPU_COUNT(&cpus);  // torch._utils.cpu_count()
  TorchrunDir t;
  const std::string show = write_script(t.dir / "show.sh", "echo \"lws=$LOCAL_WORLD_SIZE rank=$RANK\"");
  CapturedRun run = run_torchrun(t, {"--nproc-per-node", "auto", "--no-python", show});
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("lws=" + std::to_string(expected)));
  CHECK_THAT(run.out, Catch::Contains("rank=" + std::to_string(expected - 1)));
}

TEST_CASE("torchrun personality: no ./runs, the logs go to the temporary directory", "[torchrun]") {
  TorchrunDir t;
  const std::string ok = write_script(t.dir / "ok.sh", "echo hello");
  REQUIRE(run_torchrun(t, {"--no-python", ok}).exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(t.work + "/runs"));
  CHECK(std::filesystem::is_empty(t.work));
  bool found_log = false;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(t.dir.path())) {
    if (entry.path().filename() == "stdout.log" && read_text(entry.path().string()) == "hello\n") found_log = true;
  }
  CHECK(found_log);  // mgtrain's per-rank logs are kept, under $TMPDIR
}

TEST_CASE("torchrun personality: SIGTERM to the launcher stops the workers and exits 1 with an error file",
          "[torchrun][signals]") {
  TorchrunDir t;
  ChildProcess launcher = start_sleeping_job(t, "");
  const std::set<pid_t> groups = worker_groups(t);
  kill(launcher.pid, SIGTERM);
  const std::optional<Ending> ending = wait_for_ending(launcher.pid, 15s);
  REQUIRE(ending);
  CHECK_FALSE(ending->signaled);
  CHECK(ending->value == 1);
  require_no_worker_left(t, groups);
  CHECK_THAT(read_text(t.dir / "le.json"), Catch::Contains("\"message\":\"SignalException: Process " +
                                                           std::to_string(launcher.pid) + " got signal: 15\""));
}

TEST_CASE("torchrun personality: SIGUSR1 not in --signals-to-handle kills the launcher, not before its workers",
          "[torchrun][signals]") {
  TorchrunDir t;
  ChildProcess launcher = start_sleeping_job(t, "trap 'echo worker got usr1' USR1");
  const std::set<pid_t> groups = worker_groups(t);
  kill(launcher.pid, SIGUSR1);
  const std::optional<Ending> ending = wait_for_ending(launcher.pid, 15s);
  REQUIRE(ending);
  CHECK(ending->signaled);  // as torchrun, which dies by Python's default action for SIGUSR1
  CHECK(ending->value == SIGUSR1);
  require_no_worker_left(t, groups);  // torchrun leaves them running; mgtrain stopped them first
  CHECK_THAT(read_text(launcher.out_path), !Catch::Contains("worker got usr1"));
  CHECK_FALSE(file_exists(t.dir / "le.json"));
}

TEST_CASE("torchrun personality: a listed SIGUSR1 goes to the workers as the closing signal, exit 1",
          "[torchrun][signals]") {
  TorchrunDir t;
  ChildProcess launcher =
      start_sleeping_job(t, "trap 'echo worker got usr1; exit 0' USR1", {"--signals-to-handle", "SIGTERM,SIGUSR1"});
  const std::set<pid_t> groups = worker_groups(t);
  kill(launcher.pid, SIGUSR1);
  const std::optional<Ending> ending = wait_for_ending(launcher.pid, 15s);
  REQUIRE(ending);
  CHECK_FALSE(ending->signaled);
  CHECK(ending->value == 1);
  require_no_worker_left(t, groups);
  CHECK_THAT(read_text(launcher.out_path), Catch::Contains("worker got usr1"));
}

TEST_CASE("torchrun personality: the launcher's error file copies a worker's, and is not written without one",
          "[torchrun]") {
  TorchrunDir t;
  const std::string plain = write_script(t.dir / "plain.sh", "[ \"$RANK\" = 1 ] && exit 7; sleep 5");
  const std::string recorded = write_script(
      t.dir / "recorded.sh",
      "if [ \"$RANK\" = 1 ]; then printf '%s' '{\"message\": {\"message\": \"RuntimeError: boom\", \"extraInfo\": "
      "{\"py_callstack\": \"Traceback\", \"timestamp\": \"1\"}}}' > \"$TORCHELASTIC_ERROR_FILE\"; exit 3; fi; sleep 5");
  const std::string error_file = t.dir / "launcher_error.json";

  CHECK(run_torchrun(t, {"--nproc-per-node", "2", "--no-python", plain}, {{"TORCHELASTIC_ERROR_FILE", error_file}})
            .exit_code == 1);
  CHECK_FALSE(file_exists(error_file));  // torchrun: "local_rank 1 FAILED with no error file", nothing written

  CHECK(run_torchrun(t, {"--nproc-per-node", "2", "--no-python", recorded}, {{"TORCHELASTIC_ERROR_FILE", error_file}})
            .exit_code == 1);
  const std::string copied = read_text(error_file);
  CHECK_THAT(copied, Catch::Contains("\"message\":\"RuntimeError: boom\"") && Catch::Contains("\"errorCode\":3"));
  CHECK_THAT(copied, !Catch::Contains("other_failures"));  // mgtrain launch's addition
}

TEST_CASE("torchrun personality: the termination message names the failed rank (MGTRAIN_LAUNCH_TERMINATION_LOG)",
          "[torchrun]") {
  TorchrunDir t;
  const std::string recorded = write_script(
      t.dir / "recorded.sh",
      "if [ \"$RANK\" = 1 ]; then printf '%s' '{\"message\": {\"message\": \"RuntimeError: boom\", \"extraInfo\": "
      "{\"py_callstack\": \"Traceback\", \"timestamp\": \"1\"}}}' > \"$TORCHELASTIC_ERROR_FILE\"; exit 3; fi; sleep 5");
  const std::string message = t.dir / "termination-log";
  CHECK(
      run_torchrun(t, {"--nproc-per-node", "2", "--no-python", recorded}, {{"MGTRAIN_LAUNCH_TERMINATION_LOG", message}})
          .exit_code == 1);
  CHECK_THAT(read_text(message), Catch::StartsWith("mgtrain: run ") &&
                                     Catch::Contains("failed (exit code 1): rank 1 (local rank 1) on ") &&
                                     Catch::EndsWith(": exit code 3: RuntimeError: boom\n"));
}
