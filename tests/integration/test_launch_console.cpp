// The launcher's console through the real `mgtrain` binary: partial lines reach it live, a pseudo-terminal
// for one worker (launch.tty), torch's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, and the lines naming the run at its
// start and end.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "launch_fixture.hpp"
#include "process/run_capture.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// A launcher whose stdout is a pipe this test reads while it runs (stderr goes to a file).
struct PipedLauncher {
  pid_t pid = -1;
  Fd out;
};

PipedLauncher start_piped(const std::vector<std::string>& argv, const std::string& err_path) {
  Pipe pipe = make_pipe();
  const pid_t pid = fork();
  if (pid == 0) {
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(pipe.write.get(), STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return PipedLauncher{pid, std::move(pipe.read)};
}

// Reads `fd` into `text` until it contains `wanted`, the pipe ends or `timeout` passes; whether it was seen.
bool read_until(int fd, std::string& text, const std::string& wanted, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (text.find(wanted) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got <= 0) return text.find(wanted) != std::string::npos;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return true;
}

// Prints whether its streams are terminals, a coloured '\r' progress bar on stderr and a line on stdout.
const char* kTtyProbe = R"(import os, sys
print("rank", os.environ["RANK"], "stdout", sys.stdout.isatty(), "stderr", sys.stderr.isatty(), flush=True)
if sys.stdout.isatty():
    print("size", os.get_terminal_size().columns, flush=True)
for p in (10, 50, 100):
    sys.stderr.write("\r\x1b[32m%3d%%\x1b[0m|%s|" % (p, "#" * (p // 10)))
    sys.stderr.flush()
sys.stderr.write("\n")
print("\x1b[1mdone\x1b[0m")
)";

}  // namespace

TEST_CASE("a partial line reaches the console before its newline, the log file gets the final state",
          "[binary][console]") {
  TempDir dir;
  // The worker writes "a\r", then waits until the test has seen it on the console before it ends the line.
  const std::string go = dir / "go";
  const std::string worker =
      write_script(dir / "worker.sh", "printf 'a\\r'; while [ ! -e '" + go + "' ]; do sleep 0.02; done; printf 'b\\n'");
  PipedLauncher launcher =
      start_piped({kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", "live", "--", worker}, dir / "err.txt");
  std::string console;
  const bool partial_seen = read_until(launcher.out.get(), console, "[rank 0] a", 20s);
  std::ofstream(go).put('x');  // only now may the worker go on: a held partial line could not have been seen
  CHECK(partial_seen);
  CHECK(read_until(launcher.out.get(), console, "b\n", 20s));
  const std::optional<int> exit_code = wait_for_exit(launcher.pid, 20s);
  INFO(read_text(dir / "err.txt"));
  CHECK(exit_code == 0);
  CHECK(console == "[rank 0] a\r[rank 0] b\n");  // the prefix stays in front after the '\r'
  CHECK(read_text(dir / "runs/live/attempt_0/rank_0/stdout.log") == "b\n");
}

TEST_CASE("launch --hosts shows an agent's partial line before its newline", "[binary][console][hosts]") {
  TempDir dir;
  // Two agents on this host (the remote shell is plain `sh -c`); rank 0 writes "a\r" and waits for the test.
  const std::string go = dir / "go";
  const std::string worker =
      write_script(dir / "worker.sh", "[ \"$RANK\" = 0 ] || exit 0; printf 'a\\r'; while [ ! -e '" + go +
                                          "' ]; do sleep 0.02; done; printf 'b\\n'");
  int port = 0;
  close(listening_socket(port));  // a free port for node 0's rendezvous
  PipedLauncher launcher =
      start_piped({kMgtrain, "launch", "--hosts", "localhost:1,localhost:1", "--remote-shell",
                   "env MGTRAIN_TEST_HOST={host} sh -c", "--master-addr", "127.0.0.1", "--master-port",
                   std::to_string(port), "--log-dir", dir / "runs", "--run-id", "hosts-live", "--", worker},
                  dir / "err.txt");
  std::string console;
  const bool partial_seen = read_until(launcher.out.get(), console, "[localhost] [rank 0] a", 30s);
  std::ofstream(go).put('x');
  CHECK(partial_seen);
  CHECK(read_until(launcher.out.get(), console, "b\n", 20s));
  const std::optional<int> exit_code = wait_for_exit(launcher.pid, 30s);
  INFO(console << read_text(dir / "err.txt"));
  CHECK(exit_code == 0);
}

TEST_CASE("launch --tty on: rank 0 sees terminals, rank 1 pipes, the log file has no control bytes",
          "[binary][console][tty]") {
  TempDir dir;
  write_script(dir / "probe.py", kTtyProbe);
  CapturedRun run =
      mgtrain_launch(dir, {"--nproc", "2", "--run-id", "tty", "--tty", "on", "--", "python3", dir / "probe.py"});
  INFO(run.out + run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("[rank 0] rank 0 stdout True stderr True\n") &&
                          Catch::Contains("[rank 1] rank 1 stdout False stderr False\n"));
  CHECK_THAT(run.out, Catch::Contains("[rank 0] size 80\n"));     // no terminal behind the launcher: 80 columns
  CHECK_THAT(run.err, Catch::Contains("[rank 0] \x1b[32m 50%"));  // the console gets the bytes as written
  const std::string out_log = read_text(dir / "runs/tty/attempt_0/rank_0/stdout.log");
  const std::string err_log = read_text(dir / "runs/tty/attempt_0/rank_0/stderr.log");
  CHECK(out_log == "rank 0 stdout True stderr True\nsize 80\ndone\n");
  CHECK(err_log == "100%|##########|\n");  // '\r' updates collapsed, colours gone
}

TEST_CASE("launch --tty auto gives local rank 0 a terminal when the launcher runs on one", "[binary][console][tty]") {
  TempDir dir;
  write_script(dir / "probe.py", kTtyProbe);
  const std::string command =
      kMgtrain + " launch --log-dir " + dir / "runs" + " --run-id auto --nproc 2 -- python3 " + dir / "probe.py";
  SECTION("on a terminal (script -q)") {
    CapturedRun run = run_and_capture({"script", "-q", "-e", "-c", command, "/dev/null"}, CaptureOptions{});
    INFO(run.out + run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Catch::Contains("[rank 0] rank 0 stdout True stderr True") &&
                            Catch::Contains("[rank 1] rank 1 stdout False stderr False"));
    CHECK(read_text(dir / "runs/auto/attempt_0/rank_0/stderr.log") == "100%|##########|\n");
  }
  SECTION("on pipes") {
    CapturedRun run = run_and_capture({"sh", "-c", command}, CaptureOptions{});
    INFO(run.out + run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Catch::Contains("[rank 0] rank 0 stdout False stderr False"));
  }
}

TEST_CASE("launch --tty names a local rank, a wrong value is a usage error", "[binary][console][tty]") {
  TempDir dir;
  write_script(dir / "probe.py", kTtyProbe);
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--tty", "1", "--", "python3", dir / "probe.py"});
  INFO(run.out + run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.out,
             Catch::Contains("[rank 0] rank 0 stdout False") && Catch::Contains("[rank 1] rank 1 stdout True"));
  CapturedRun wrong = mgtrain_launch(dir, {"--nproc", "2", "--tty", "2", "--", "true"});
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("launch.tty: local rank 2 does not exist"));
  CapturedRun word = mgtrain_launch(dir, {"--tty", "maybe", "--", "true"});
  CHECK(word.exit_code == 2);
  CHECK_THAT(word.err, Catch::Contains("maybe"));
}

TEST_CASE("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE sets the console prefix, a typo in it is refused",
          "[binary][console][prefix]") {
  TempDir dir;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  CaptureOptions options;
  options.set_env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = "${hostname}|[${role_name}${local_rank}/$rank]:";
  CapturedRun run =
      mgtrain_launch(dir, {"--nproc", "2", "--run-id", "prefix", "--", "sh", "-c", "echo out; echo err >&2"}, options);
  INFO(run.out + run.err);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains(std::string(host) + "|[default1/1]:out\n"));
  CHECK_THAT(run.err, Catch::Contains(std::string(host) + "|[default0/0]:err\n"));
  CHECK(read_text(dir / "runs/prefix/attempt_0/rank_1/stdout.log") == "out\n");  // files are never prefixed
  // ${role_name} is the workers' ROLE_NAME, launch.role (torch's tail_log uses the worker spec's role).
  CapturedRun role =
      mgtrain_launch(dir, {"--role", "trainer", "--run-id", "role", "--", "sh", "-c", "echo out"}, options);
  CHECK(role.exit_code == 0);
  CHECK_THAT(role.out, Catch::Contains(std::string(host) + "|[trainer0/0]:out\n"));

  options.set_env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = "[${local_rnak}]";
  CapturedRun typo = mgtrain_launch(dir, {"--", "true"}, options);
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err,
             Catch::Contains("unknown placeholder ${local_rnak}") && Catch::Contains("did you mean local_rank"));
}

TEST_CASE("mgtrain launch names its run and folder at the start and at the end, the torchrun personality does not",
          "[binary][console][run_id]") {
  TempDir dir;
  const std::string start = "mgtrain: run named: logs in " + dir / "runs/named" + "\n";
  CapturedRun run = mgtrain_launch(dir, {"--run-id", "named", "--", "sh", "-c", "echo working"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.out == "[rank 0] working\n");
  CHECK_THAT(run.err, Catch::StartsWith(start) || Catch::Contains("\n" + start));
  CHECK_THAT(run.err, Catch::EndsWith("\nmgtrain: run named succeeded (exit code 0): logs in " + dir / "runs/named\n"));

  CapturedRun failed = mgtrain_launch(dir, {"--run-id", "failing", "--", "sh", "-c", "exit 3"});
  INFO(failed.out << failed.err);
  CHECK(failed.exit_code == 3);
  CHECK_THAT(failed.err, Catch::Contains("mgtrain: run failing: logs in " + dir / "runs/failing\n"));
  CHECK_THAT(failed.err,
             Catch::EndsWith("\nmgtrain: run failing failed (exit code 3): logs in " + dir / "runs/failing\n"));

  CapturedRun torchrun = run_and_capture({kMgtrain, "torchrun", "--log-dir", dir / "runs", "--rdzv-id", "quiet",
                                          "--nproc-per-node", "1", "--no-python", "sh", "-c", "echo working"},
                                         CaptureOptions{});
  INFO(torchrun.out << torchrun.err);
  CHECK(torchrun.exit_code == 0);
  CHECK(torchrun.out == "working\n");
  CHECK_THAT(torchrun.out + torchrun.err, !Catch::Contains("mgtrain: run "));
  CHECK(file_exists(dir / "runs/quiet/run.json"));
}

TEST_CASE("console deduplication: 4 ranks printing the same line give one [ranks 0-3] line, the logs keep 4",
          "[binary][console][dedup]") {
  TempDir dir;
  // Each rank prints the shared line, then one of its own; rank 3 says "only me" on stderr.
  const std::vector<std::string> program = {
      "--", "sh", "-c",
      "echo 'loading data'; echo \"rank $RANK ready\"; [ \"$RANK\" = 3 ] && echo 'only me' >&2; true"};
  std::vector<std::string> args = {"--nproc", "4", "--run-id", "dedup"};
  args.insert(args.end(), program.begin(), program.end());
  CapturedRun run = mgtrain_launch(dir, args);
  INFO(run.out + run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("[ranks 0-3] loading data\n"));  // auto: on from 4 ranks
  CHECK(run.out.find("[rank 0] loading data") == std::string::npos);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK_THAT(run.out,
               Catch::Contains("[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + " ready\n"));
    CHECK(read_text(dir / ("runs/dedup/attempt_0/rank_" + std::to_string(rank) + "/stdout.log")) ==
          "loading data\nrank " + std::to_string(rank) + " ready\n");
  }
  CHECK_THAT(run.err, Catch::Contains("[rank 3] only me\n"));

  // Turned off, every rank's copy is shown.
  args[3] = "plain";
  args.insert(args.begin(), "--no-console-dedup");
  CapturedRun plain = mgtrain_launch(dir, args);
  REQUIRE(plain.exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK_THAT(plain.out, Catch::Contains("[rank " + std::to_string(rank) + "] loading data\n"));
  }
  CHECK(plain.out.find("[ranks") == std::string::npos);

  // 2 ranks: auto leaves it off; --console-dedup turns it on.
  CapturedRun two = mgtrain_launch(dir, {"--nproc", "2", "--run-id", "two", "--", "sh", "-c", "echo same"});
  CHECK_THAT(two.out, Catch::Contains("[rank 0] same\n") && Catch::Contains("[rank 1] same\n"));
  CapturedRun asked =
      mgtrain_launch(dir, {"--console-dedup", "--nproc", "2", "--run-id", "asked", "--", "sh", "-c", "echo same"});
  CHECK_THAT(asked.out, Catch::Contains("[ranks 0-1] same\n"));
}
