// Signals to a real launcher process (the launch_harness binary): forwarding, exit codes, the
// second Ctrl-C, SIGKILL of the launcher — and afterwards no process of the job may be alive.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include "launch_fixture.hpp"
#include "util/exit_status.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// Each worker records its process group, starts a grandchild and waits; `traps` runs first.
std::string worker_script(const TempDir& dir, const std::string& traps = "") {
  return write_script(dir / "worker.sh",
                      traps +
                          "\necho $$ > \"$1/pgid_$RANK.tmp\" && mv \"$1/pgid_$RANK.tmp\" \"$1/pgid_$RANK\"\n"
                          "sleep 30 &\nwait\nwait");
}

std::set<pid_t> recorded_groups(const TempDir& dir, int nproc) {
  std::set<pid_t> groups;
  for (int rank = 0; rank < nproc; ++rank) {
    std::string text = read_text(dir / ("pgid_" + std::to_string(rank)));
    if (!text.empty()) groups.insert(static_cast<pid_t>(std::stol(text)));
  }
  return groups;
}

ChildProcess start_launcher(const TempDir& dir, const std::string& worker, double grace = 2.0) {
  std::vector<std::string> argv = {harness_path(),
                                   "nproc=2",
                                   "grace_period=" + std::to_string(grace),
                                   "log_dir=" + (dir / "runs"),
                                   "run_id=sig",
                                   "--",
                                   worker,
                                   dir.path()};
  ChildProcess launcher = start_process(argv, dir / "launcher");
  bool ready = wait_until([&] { return file_exists(dir / "pgid_0") && file_exists(dir / "pgid_1"); }, 10s);
  if (!ready) {
    kill(launcher.pid, SIGKILL);
    wait_for_exit(launcher.pid, 5s);
    FAIL("workers did not start; launcher stderr: " << read_text(launcher.err_path));
  }
  return launcher;
}

void require_no_job_process_left(const TempDir& dir, const std::set<pid_t>& groups) {
  bool gone = wait_until([&] { return live_job_processes(groups, dir.path()).empty(); }, 5s);
  if (!gone) {
    std::vector<pid_t> left = live_job_processes(groups, dir.path());
    std::string described;
    for (pid_t pid : left) {
      std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
      std::string cmdline = read_text("/proc/" + std::to_string(pid) + "/cmdline");
      for (char& c : cmdline) c = c == '\0' ? ' ' : c;
      described += "\n  " + stat.substr(0, 120) + " | " + cmdline;
      kill(pid, SIGKILL);
    }
    FAIL(left.size() << " process(es) of the job outlived the launcher:" << described);
  }
}

}  // namespace

TEST_CASE("SIGTERM, SIGINT and SIGHUP to the launcher stop every worker and its children", "[signals]") {
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    DYNAMIC_SECTION(mgtrain::signal_name(signal)) {
      TempDir dir;
      ChildProcess launcher = start_launcher(dir, worker_script(dir));
      std::set<pid_t> groups = recorded_groups(dir, 2);
      REQUIRE(groups.size() == 2);
      kill(launcher.pid, signal);
      std::optional<int> code = wait_for_exit(launcher.pid, 10s);
      REQUIRE(code);
      CHECK(*code == 128 + signal);
      CHECK_THAT(read_text(launcher.err_path), Catch::Contains("stopped by " + mgtrain::signal_name(signal)));
      require_no_job_process_left(dir, groups);
    }
  }
}

TEST_CASE("SIGKILL of the launcher leaves no orphans", "[signals]") {
  TempDir dir;
  ChildProcess launcher = start_launcher(dir, worker_script(dir));
  std::set<pid_t> groups = recorded_groups(dir, 2);
  kill(launcher.pid, SIGKILL);
  REQUIRE(wait_for_exit(launcher.pid, 5s) == std::optional<int>(137));
  require_no_job_process_left(dir, groups);
}

TEST_CASE("a second SIGINT kills at once, without waiting for the grace period", "[signals]") {
  TempDir dir;
  ChildProcess launcher = start_launcher(dir, worker_script(dir, "trap '' INT TERM"), 60.0);
  std::set<pid_t> groups = recorded_groups(dir, 2);
  auto started = std::chrono::steady_clock::now();
  kill(launcher.pid, SIGINT);
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(wait_for_exit(launcher.pid, 1ms));  // the workers ignore SIGINT: still running
  kill(launcher.pid, SIGINT);
  std::optional<int> code = wait_for_exit(launcher.pid, 10s);
  REQUIRE(code);
  CHECK(*code == 130);
  CHECK(std::chrono::steady_clock::now() - started < 30s);
  require_no_job_process_left(dir, groups);
}

TEST_CASE("SIGUSR1 is forwarded to the workers, which decide what to do", "[signals]") {
  TempDir dir;
  ChildProcess launcher = start_launcher(dir, worker_script(dir, "trap 'echo got usr1; exit 0' USR1"));
  std::set<pid_t> groups = recorded_groups(dir, 2);
  kill(launcher.pid, SIGUSR1);
  std::optional<int> code = wait_for_exit(launcher.pid, 10s);
  REQUIRE(code);
  CHECK(*code == 0);
  CHECK_THAT(read_text(launcher.out_path),
             Catch::Contains("[rank 0] got usr1") && Catch::Contains("[rank 1] got usr1"));
  require_no_job_process_left(dir, groups);
}

TEST_CASE("a worker ignoring SIGTERM is killed after the grace period", "[signals]") {
  TempDir dir;
  std::string worker =
      write_script(dir / "stubborn.sh",
                   "if [ \"$RANK\" = 0 ]; then trap '' TERM; touch \"$1/ready\"; while :; do sleep 0.05; done; fi\n"
                   "while [ ! -e \"$1/ready\" ]; do sleep 0.01; done; exit 5");
  ChildProcess launcher = start_process({harness_path(), "nproc=2", "grace_period=0.3", "log_dir=" + (dir / "runs"),
                                         "run_id=grace", "--", worker, dir.path()},
                                        dir / "launcher");
  std::optional<int> code = wait_for_exit(launcher.pid, 10s);
  REQUIRE(code);
  CHECK(*code == 5);
  std::string err = read_text(launcher.err_path);
  CHECK_THAT(err, Catch::Contains("rank       1 (local rank 1)"));
  CHECK_THAT(err, !Catch::Contains("Other failures"));  // rank 0 died of our SIGKILL: not a failure
  // Half-way through the grace period the console says whom the stop waits for, once.
  const std::string waiting = "mgtrain: waiting for rank 0 (pid ";
  CHECK_THAT(err, Catch::Contains(waiting) && Catch::Contains(") to exit after SIGTERM: SIGKILL in "));
  CHECK(err.find(waiting) == err.rfind(waiting));
  require_no_job_process_left(dir, {});
}

namespace {

// Starts argv as a child of a parent that left `ignored` ignored: the disposition is set in the forked child and stays
// across exec (an interpreter in between, as perl was here, adds its own ways to fail). A script's `mgtrain launch &`
// starts it so with SIGINT and SIGQUIT.
ChildProcess start_with_ignored(const std::vector<std::string>& argv, const std::string& output_prefix,
                                const std::vector<int>& ignored) {
  ChildProcess child;
  child.out_path = output_prefix + ".out";
  child.err_path = output_prefix + ".err";
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(child.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(child.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int signal : ignored) std::signal(signal, SIG_IGN);
    execv(args[0], args.data());
    _exit(127);
  }
  child.pid = pid;
  return child;
}

}  // namespace

TEST_CASE("a launcher started with SIGCHLD ignored still sees its workers exit", "[signals]") {
  TempDir dir;
  ChildProcess launcher = start_with_ignored(
      {harness_path(), "nproc=2", "log_dir=" + (dir / "runs"), "run_id=chld", "--", "sh", "-c", "exit $LOCAL_RANK"},
      dir / "launcher", {SIGCHLD});
  std::optional<int> code = wait_for_exit(launcher.pid, 10s);
  REQUIRE(code);
  const std::string err = read_text(launcher.err_path);
  INFO("the launcher's stderr:\n" << err);
  CHECK(*code == 1);
  CHECK_THAT(err, Catch::Contains("rank       1 (local rank 1)"));
  CHECK_THAT(err, !Catch::Contains("reaped outside the launcher"));
}

TEST_CASE("a launcher started with SIGINT ignored (`mgtrain launch &` in a script) stops on SIGINT", "[signals]") {
  TempDir dir;
  // Each worker records the signals a program it starts ignores and blocks (as the worker passes them on: a shell keeps
  // an ignored signal ignored), then waits.
  const std::string worker =
      write_script(dir / "worker.sh",
                   "grep -E '^Sig(Ign|Blk):' /proc/self/status > \"$1/signals_$RANK\"\n"
                   "echo $$ > \"$1/pgid_$RANK.tmp\" && mv \"$1/pgid_$RANK.tmp\" \"$1/pgid_$RANK\"\n"
                   "sleep 30 &\nwait");
  // A grace period no test waits for: the job ends in time only when the workers act on the SIGINT passed on.
  ChildProcess launcher = start_with_ignored({harness_path(), "nproc=2", "grace_period=600",
                                              "log_dir=" + (dir / "runs"), "run_id=bg", "--", worker, dir.path()},
                                             dir / "launcher", {SIGINT, SIGQUIT});
  const bool ready = wait_until([&] { return file_exists(dir / "pgid_0") && file_exists(dir / "pgid_1"); }, 10s);
  if (!ready) kill(launcher.pid, SIGKILL);
  REQUIRE(ready);
  const std::set<pid_t> groups = recorded_groups(dir, 2);
  for (int rank = 0; rank < 2; ++rank) {
    // The workers start with every default disposition (nothing ignored) and nothing blocked.
    CHECK(read_text(dir / ("signals_" + std::to_string(rank))) ==
          "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
  }
  kill(launcher.pid, SIGINT);
  const std::optional<int> code = wait_for_exit(launcher.pid, 60s);
  if (!code) {
    kill(launcher.pid, SIGKILL);
    for (pid_t group : groups) kill(-group, SIGKILL);
  }
  REQUIRE(code);
  CHECK(*code == 130);
  CHECK_THAT(read_text(launcher.err_path), Catch::Contains("stopped by SIGINT"));
  require_no_job_process_left(dir, groups);
}

TEST_CASE("SIGTERM to the launcher: workers that save and exit 75 make it exit 75, as documented", "[signals]") {
  TempDir dir;
  ChildProcess launcher = start_launcher(dir, worker_script(dir, "trap 'exit 75' TERM"));
  const std::set<pid_t> groups = recorded_groups(dir, 2);
  kill(launcher.pid, SIGTERM);
  const std::optional<int> code = wait_for_exit(launcher.pid, 10s);
  REQUIRE(code);
  CHECK(*code == 75);
  CHECK_THAT(read_text(launcher.err_path),
             Catch::Contains("mgtrain: stopped by SIGTERM; the workers of run sig saved a checkpoint and stopped; run "
                             "the same command again to resume (exit code 75)"));
  require_no_job_process_left(dir, groups);
}
