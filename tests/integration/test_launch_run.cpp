// run_launch with real worker processes (shell scripts): the environment contract, exit codes,
// the failure report, restarts, logs, console prefixes and filters, ports, the hang watchdog; and real `mgtrain
// launch` processes sharing a run id (a live launcher's run folder is refused, a dead one's taken over).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "launch_fixture.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

std::map<std::string, std::string> parse_env_dump(const std::string& text) {
  std::map<std::string, std::string> env;
  for (const std::string& line : split_lines(text)) {
    std::size_t equals = line.find('=');
    if (equals != std::string::npos) env[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return env;
}

// Process groups recorded by workers that ran `echo $$ > "$MGTRAIN_RUN_DIR/pgid_$RANK"`.
std::set<pid_t> recorded_groups(const std::string& run_dir, int nproc) {
  std::set<pid_t> groups;
  for (int rank = 0; rank < nproc; ++rank) {
    std::string text = read_text(run_dir + "/pgid_" + std::to_string(rank));
    if (!text.empty()) groups.insert(static_cast<pid_t>(std::stol(text)));
  }
  return groups;
}

}  // namespace

TEST_CASE("every worker gets torchrun's environment, consistent across ranks", "[launch][env]") {
  TempDir dir;
  std::string worker = write_script(
      dir / "worker.sh", "env > \"$MGTRAIN_RUN_DIR/env_$RANK\"; echo \"$1\" > \"$MGTRAIN_RUN_DIR/arg_$RANK\"");
  LaunchConfig launch = test_launch_config(dir, 3);
  launch.max_restarts = 2;
  LaunchOutcome outcome =
      launch_in_process(launch, {worker, "arg-${local_rank}"}, {{"MGTRAIN_TEST_SENTINEL", "s3nt!nel value"}});
  REQUIRE(outcome.exit_code == 0);
  // The launcher's CPUs (this process's affinity mask) divided among the 3 workers, at least 1 each.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  REQUIRE(sched_getaffinity(0, sizeof cpus, &cpus) == 0);
  const std::string threads = std::to_string(std::max(CPU_COUNT(&cpus) / 3, 1));
  CHECK_THAT(outcome.err, Catch::Contains("setting OMP_NUM_THREADS=" + threads + " for each of the 3 workers"));
  std::set<std::string> ports;
  for (int rank = 0; rank < 3; ++rank) {
    auto env = parse_env_dump(read_text(outcome.run_dir + "/env_" + std::to_string(rank)));
    INFO("rank " << rank);
    CHECK(env["RANK"] == std::to_string(rank));
    CHECK(std::stoi(env["RANK"]) ==
          std::stoi(env["GROUP_RANK"]) * std::stoi(env["LOCAL_WORLD_SIZE"]) + std::stoi(env["LOCAL_RANK"]));
    CHECK(env["LOCAL_RANK"] == std::to_string(rank));
    CHECK(env["ROLE_RANK"] == env["RANK"]);
    CHECK(env["ROLE_NAME"] == "default");
    CHECK(env["GROUP_RANK"] == "0");
    CHECK(env["LOCAL_WORLD_SIZE"] == "3");
    CHECK(env["WORLD_SIZE"] == "3");
    CHECK(env["ROLE_WORLD_SIZE"] == "3");
    CHECK(env["GROUP_WORLD_SIZE"] == "1");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    int port = std::stoi(env["MASTER_PORT"]);
    CHECK((port > 0 && port < 65536));
    ports.insert(env["MASTER_PORT"]);
    CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "0");
    CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "2");
    CHECK(env["TORCHELASTIC_RUN_ID"] == "test-run");
    CHECK(env["TORCHELASTIC_ERROR_FILE"] ==
          outcome.run_dir + "/attempt_0/rank_" + std::to_string(rank) + "/error.json");
    CHECK(env["TORCHELASTIC_USE_AGENT_STORE"] == "False");  // rank 0 hosts the TCPStore, not the launcher
    CHECK(env["OMP_NUM_THREADS"] == threads);
    CHECK(env["MGTRAIN_TEST_SENTINEL"] == "s3nt!nel value");
    CHECK(env["MGTRAIN_RUN_DIR"] == outcome.run_dir);
    CHECK(env["MGTRAIN_CONFIG_FILE"] == outcome.run_dir + "/config.yaml");
    CHECK(read_text(outcome.run_dir + "/arg_" + std::to_string(rank)) == "arg-" + std::to_string(rank) + "\n");
  }
  CHECK(ports.size() == 1);  // one store for the whole group
  CHECK(file_exists(outcome.run_dir + "/config.yaml"));
  CHECK_FALSE(file_exists(outcome.run_dir + "/failure.json"));
}

TEST_CASE("a worker exiting 3 fails the job with 3 and a report naming it", "[launch][failure]") {
  TempDir dir;
  std::string worker =
      write_script(dir / "worker.sh",
                   "echo $$ > \"$MGTRAIN_RUN_DIR/pgid_$RANK\"\n"
                   "if [ \"$RANK\" = 1 ]; then while [ ! -s \"$MGTRAIN_RUN_DIR/pgid_0\" ]; do sleep 0.01; done; i=1; "
                   "while [ $i -le 30 ]; do echo \"err line $i\" >&2; i=$((i+1)); done; exit 3; fi\n"
                   "sleep 30 &\nwait");
  LaunchConfig config = test_launch_config(dir, 2);
  config.termination_log = dir / "termination-log";  // Kubernetes' file, named (docs/launch.md)
  std::ofstream(dir / "termination-log")
      << "an earlier message, longer than the new one ............................\n";
  auto started = std::chrono::steady_clock::now();
  LaunchOutcome outcome = launch_in_process(config, {worker});
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));  // rank 0 was stopped, not waited for
  CHECK(outcome.exit_code == 3);
  const std::string message = read_text(dir / "termination-log");  // replaced whole, one line
  CHECK_THAT(message, Catch::StartsWith("mgtrain: run ") &&
                          Catch::Contains(" failed (exit code 3): rank 1 (local rank 1) on ") &&
                          Catch::EndsWith(": exit code 3: err line 30\n"));
  CHECK(std::count(message.begin(), message.end(), '\n') == 1);
  CHECK_THAT(outcome.err, Catch::Contains("Root cause (first failure):"));
  CHECK_THAT(outcome.err, Catch::Contains("rank       1 (local rank 1)"));
  CHECK_THAT(outcome.err, Catch::Contains("failure    exit code 3"));
  CHECK_THAT(outcome.err, Catch::Contains("last 20 lines of stderr:\n    | err line 11\n"));
  CHECK_THAT(outcome.err, Catch::Contains("    | err line 30\n"));
  CHECK_THAT(outcome.err, !Catch::Contains("Other failures"));  // rank 0 was stopped by the launcher

  YAML::Node report = YAML::Load(read_text(outcome.run_dir + "/failure.json"));
  CHECK(report["exit_code"].as<int>() == 3);
  CHECK(report["root_cause"]["global_rank"].as<int>() == 1);
  CHECK(report["root_cause"]["exit_code"].as<int>() == 3);
  CHECK(report["root_cause"]["pid"].as<long>() > 0);
  CHECK(report["root_cause"]["stderr_tail"].size() == 20);
  CHECK(report["root_cause"]["stderr_tail"][19].as<std::string>() == "err line 30");
  CHECK(report["other_failures"].size() == 0);
  std::set<pid_t> groups = recorded_groups(outcome.run_dir, 2);
  CHECK(groups.size() == 2);
  CHECK(wait_until([&] { return live_job_processes(groups, "").empty(); }, std::chrono::seconds(5)));  // torn down
}

TEST_CASE("a worker killed by SIGSEGV: exit code 139 and the signal's name", "[launch][failure]") {
  TempDir dir;
  std::string worker = write_script(dir / "worker.sh", "ulimit -c 0; echo about to crash >&2; kill -SEGV $$");
  LaunchOutcome outcome = launch_in_process(test_launch_config(dir, 1), {worker});
  CHECK(outcome.exit_code == 139);
  CHECK_THAT(outcome.err, Catch::Contains("signal SIGSEGV (11)"));
  CHECK_THAT(outcome.err, Catch::Contains("| about to crash"));
  YAML::Node report = YAML::Load(read_text(outcome.run_dir + "/failure.json"));
  CHECK(report["root_cause"]["signal_name"].as<std::string>() == "SIGSEGV");
}

TEST_CASE("torch's error file appears in the report", "[launch][failure]") {
  TempDir dir;
  std::string worker = write_script(
      dir / "worker.sh",
      "printf '%s' '{\"message\": {\"message\": \"ValueError: bad batch\", \"extraInfo\": {\"py_callstack\": "
      "\"Traceback (most recent call last):\\n  File \\\"train.py\\\", line 9\\nValueError: bad batch\", "
      "\"timestamp\": \"1700000000\"}}}' > \"$TORCHELASTIC_ERROR_FILE\"; exit 1");
  LaunchOutcome outcome = launch_in_process(test_launch_config(dir, 1), {worker});
  CHECK(outcome.exit_code == 1);
  CHECK_THAT(outcome.err, Catch::Contains("error      ValueError: bad batch"));
  CHECK_THAT(outcome.err, Catch::Contains("      File \"train.py\", line 9"));
  YAML::Node report = YAML::Load(read_text(outcome.run_dir + "/failure.json"));
  CHECK(report["root_cause"]["error_file"]["message"].as<std::string>() == "ValueError: bad batch");
}

TEST_CASE("restarts: failing only on attempt 0 succeeds with max_restarts 1 and fails with 0", "[launch][restart]") {
  TempDir dir;
  // Rank 1 fails on attempt 0 only after rank 0 has printed its line (else the group stop may come first).
  const std::string ready = dir / "rank0-printed";
  std::string worker =
      write_script(dir / "worker.sh",
                   "echo \"attempt $TORCHELASTIC_RESTART_COUNT port $MASTER_PORT\"\n"
                   "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$LOCAL_RANK\" = 0 ]; then touch '" +
                       ready +
                       "'; exec sleep 30; fi\n"
                       "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
                       "  while [ ! -e '" +
                       ready +
                       "' ]; do sleep 0.01; done; exit 3\n"
                       "fi");
  LaunchConfig launch = test_launch_config(dir, 2);
  SECTION("max_restarts 1") {
    launch.max_restarts = 1;
    LaunchOutcome outcome = launch_in_process(launch, {worker});
    CHECK(outcome.exit_code == 0);
    std::string first = read_text(outcome.run_dir + "/attempt_0/rank_0/stdout.log");
    std::string second = read_text(outcome.run_dir + "/attempt_1/rank_0/stdout.log");
    CHECK_THAT(first, Catch::StartsWith("attempt 0 port "));
    CHECK_THAT(second, Catch::StartsWith("attempt 1 port "));
    CHECK(first.substr(15) != second.substr(15));  // an auto-picked port is picked again
    CHECK_FALSE(file_exists(outcome.run_dir + "/failure.json"));
    CHECK_THAT(outcome.err,
               Catch::Contains("mgtrain: restarting all workers (attempt 2 of 2) after local rank 1 exit code 3; "
                               "the failed attempt's logs are in " +
                               outcome.run_dir + "/attempt_0"));
  }
  SECTION("max_restarts 0") {
    launch.max_restarts = 0;
    LaunchOutcome outcome = launch_in_process(launch, {worker});
    CHECK(outcome.exit_code == 3);
    CHECK_THAT(outcome.err, !Catch::Contains("restarting"));
    CHECK_FALSE(file_exists(outcome.run_dir + "/attempt_1"));
  }
}

TEST_CASE("a worker's exit 2 (bad input) ends the job at once, with restarts left, saying why once",
          "[launch][restart]") {
  TempDir dir;
  std::string worker =
      write_script(dir / "worker.sh",
                   "echo \"attempt $TORCHELASTIC_RESTART_COUNT\" >> \"$MGTRAIN_RUN_DIR/attempts_$RANK\"\n"
                   "if [ \"$RANK\" = 1 ]; then echo 'error: data.path: no such file' >&2; exit 2; fi\n"
                   "exec sleep 30");
  LaunchConfig launch = test_launch_config(dir, 2);
  launch.max_restarts = 2;
  LaunchOutcome outcome = launch_in_process(launch, {worker});
  INFO(outcome.err);
  CHECK(outcome.exit_code == 2);
  CHECK(read_text(outcome.run_dir + "/attempts_1") == "attempt 0\n");  // started once
  CHECK_FALSE(file_exists(outcome.run_dir + "/attempt_1"));
  CHECK_THAT(outcome.err, !Catch::Contains("restarting"));
  const std::string why = "rank 1 exit code 2, which means bad input";
  CHECK_THAT(outcome.err, Catch::Contains(why) && Catch::Contains("not restarted, since a restart would fail the same "
                                                                  "way (2 restarts of --max-restarts 2 left unused)"));
  CHECK(outcome.err.find(why) == outcome.err.rfind(why));  // once
  YAML::Node report = YAML::Load(read_text(outcome.run_dir + "/failure.json"));
  CHECK(report["root_cause"]["exit_code"].as<int>() == 2);
}

TEST_CASE("log files per attempt and rank, console lines prefixed by rank", "[launch][output]") {
  TempDir dir;
  std::string worker = write_script(
      dir / "worker.sh", "echo \"out of $RANK\"; echo \"err of $RANK\" >&2; printf 'no newline %s' \"$RANK\"");
  LaunchOutcome outcome = launch_in_process(test_launch_config(dir, 2), {worker});
  REQUIRE(outcome.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    std::string r = std::to_string(rank);
    std::string rank_dir = outcome.run_dir + "/attempt_0/rank_" + r;
    CHECK(read_text(rank_dir + "/stdout.log") == "out of " + r + "\nno newline " + r);
    CHECK(read_text(rank_dir + "/stderr.log") == "err of " + r + "\n");
    CHECK_THAT(outcome.out, Catch::Contains("[rank " + r + "] out of " + r + "\n"));
    CHECK_THAT(outcome.out, Catch::Contains("[rank " + r + "] no newline " + r + "\n"));  // tail flushed as a line
    CHECK_THAT(outcome.err, Catch::Contains("[rank " + r + "] err of " + r + "\n"));
    CHECK_THAT(outcome.out, !Catch::Contains("err of"));
  }
}

TEST_CASE("local_ranks_filter and redirect limit the console, never the files", "[launch][output]") {
  TempDir dir;
  std::string worker = write_script(dir / "worker.sh", "echo \"out of $RANK\"; echo \"err of $RANK\" >&2");
  LaunchConfig launch = test_launch_config(dir, 2);
  SECTION("filter") {
    launch.local_ranks_filter = LocalRanks::parse("1").value();
    LaunchOutcome outcome = launch_in_process(launch, {worker});
    CHECK(outcome.out == "[rank 1] out of 1\n");
    CHECK_THAT(outcome.err, Catch::Contains("[rank 1] err of 1") && !Catch::Contains("[rank 0]"));
    CHECK(read_text(outcome.run_dir + "/attempt_0/rank_0/stdout.log") == "out of 0\n");
  }
  SECTION("redirect stdout, tee rank 1 back") {
    launch.redirect = StdSpec::parse("1").value();
    launch.tee = StdSpec::parse("1:1").value();
    LaunchOutcome outcome = launch_in_process(launch, {worker});
    CHECK(outcome.out == "[rank 1] out of 1\n");
    CHECK_THAT(outcome.err, Catch::Contains("[rank 0] err of 0") && Catch::Contains("[rank 1] err of 1"));
    CHECK(read_text(outcome.run_dir + "/attempt_0/rank_0/stdout.log") == "out of 0\n");
  }
}

TEST_CASE("two ranks printing long lines fast never tear a line", "[launch][output]") {
  TempDir dir;
  // Each rank prints 400 lines of 5000 copies of its own digit, in large unaligned writes.
  std::string worker = write_script(
      dir / "worker.sh",
      "awk -v r=\"$RANK\" 'BEGIN { s = \"\"; for (i = 0; i < 5000; i++) s = s r; for (j = 0; j < 400; j++) print s }'");
  LaunchOutcome outcome = launch_in_process(test_launch_config(dir, 2), {worker});
  REQUIRE(outcome.exit_code == 0);
  std::vector<std::string> lines = split_lines(outcome.out);
  CHECK(lines.size() == 800);
  std::map<char, int> per_rank;
  for (const std::string& line : lines) {
    REQUIRE(line.size() == 9 + 5000);
    REQUIRE(line.compare(0, 6, "[rank ") == 0);
    char rank = line[6];
    REQUIRE(line.find_first_not_of(rank, 9) == std::string::npos);
    ++per_rank[rank];
  }
  CHECK(per_rank['0'] == 400);
  CHECK(per_rank['1'] == 400);
}

TEST_CASE("master port: 0 picks a free one, a busy explicit one is refused before any worker starts",
          "[launch][port]") {
  TempDir dir;
  std::string marker = dir / "started";
  std::string worker = write_script(dir / "worker.sh", "touch \"" + marker + "\"; echo \"$MASTER_PORT\"");
  LaunchConfig launch = test_launch_config(dir, 1);
  int busy_port = 0;
  int busy_fd = listening_socket(busy_port);

  launch.master_port = 0;
  LaunchOutcome picked = launch_in_process(launch, {worker});
  CHECK(picked.exit_code == 0);
  int port = std::stoi(read_text(picked.run_dir + "/attempt_0/rank_0/stdout.log"));
  CHECK(port > 0);
  CHECK(port != busy_port);

  unlink(marker.c_str());
  launch.master_port = busy_port;
  CHECK_THROWS_WITH(launch_in_process(launch, {worker}),
                    Catch::Contains("master_port " + std::to_string(busy_port) + " is already in use") &&
                        Catch::Contains("--master-port 0"));
  CHECK_THROWS_AS(launch_in_process(launch, {worker}), UsageError);
  CHECK_FALSE(file_exists(marker));

  launch.nnodes =
      NodeRange::exactly(2);  // node 0 of several hosts the node agents' rendezvous on that port: refused too
  CHECK_THROWS_WITH(launch_in_process(launch, {worker}),
                    Catch::Contains("master_port " + std::to_string(busy_port) + " is already in use") &&
                        Catch::Contains("node 0 hosts mgtrain's rendezvous there"));
  CHECK_FALSE(file_exists(marker));
  close(busy_fd);
}

TEST_CASE("hang watchdog: a worker that opted in and went silent is stopped and reported", "[launch][heartbeat]") {
  TempDir dir;
  std::string worker = write_script(dir / "worker.sh",
                                    "echo $$ > \"$MGTRAIN_RUN_DIR/pgid_$RANK\"\n"
                                    "if [ \"$RANK\" = 1 ]; then while [ ! -s \"$MGTRAIN_RUN_DIR/pgid_0\" ]; do sleep "
                                    "0.01; done; touch \"$MGTRAIN_HEARTBEAT_FILE\"; fi\n"
                                    "sleep 30 &\nwait");
  LaunchConfig launch = test_launch_config(dir, 2);
  launch.hang_timeout = 0.4;
  auto started = std::chrono::steady_clock::now();
  LaunchOutcome outcome = launch_in_process(launch, {worker});
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  CHECK(outcome.exit_code == 124);
  CHECK_THAT(outcome.err, Catch::Contains("rank       1 (local rank 1)"));
  CHECK_THAT(outcome.err, Catch::Contains("failure    hung: no progress for"));
  YAML::Node report = YAML::Load(read_text(outcome.run_dir + "/failure.json"));
  CHECK(report["root_cause"]["hung"].as<bool>());
  CHECK(report["root_cause"]["silent_s"].as<double>() >= 0.4);
  std::set<pid_t> groups = recorded_groups(outcome.run_dir, 2);
  CHECK(groups.size() == 2);
  CHECK(wait_until([&] { return live_job_processes(groups, "").empty(); }, std::chrono::seconds(5)));  // torn down
}

TEST_CASE("hang watchdog: workers that beat, or never opted in, are left alone", "[launch][heartbeat]") {
  TempDir dir;
  std::string worker = write_script(dir / "worker.sh",
                                    "if [ \"$RANK\" = 0 ]; then i=0; while [ $i -lt 20 ]; do echo $i > "
                                    "\"$MGTRAIN_HEARTBEAT_FILE\"; sleep 0.1; i=$((i+1)); done; exit 0; fi\n"
                                    "sleep 2.2  # never opted in: silence is fine");
  LaunchConfig launch = test_launch_config(dir, 2);
  launch.hang_timeout = 1.0;  // rank 0 beats for twice as long, every 0.1 s
  LaunchOutcome outcome = launch_in_process(launch, {worker});
  CHECK(outcome.exit_code == 0);
}

TEST_CASE("a command that cannot run and a missing trainer binary give clear usage errors", "[launch][usage]") {
  TempDir dir;
  LaunchConfig launch = test_launch_config(dir, 2);
  CHECK_THROWS_WITH(
      launch_in_process(launch, {"/nonexistent/program-xyz"}),
      Catch::Contains("cannot run worker command '/nonexistent/program-xyz'") && Catch::Contains("No such file"));
  CHECK_THROWS_AS(launch_in_process(launch, {"no-such-program-on-path-xyz"}), UsageError);
  launch.worker = dir / "missing-worker";
  CHECK_THROWS_WITH(launch_in_process(launch, {}),
                    Catch::Contains(dir / "missing-worker") && Catch::Contains("launch.worker"));
}

TEST_CASE("the built-in trainer mode runs the worker binary with the resolved config", "[launch][trainer]") {
  TempDir dir;
  LaunchConfig launch = test_launch_config(dir, 1);
  launch.worker =
      write_script(dir / "fake-worker", "echo \"config $1\"; test \"$1\" = \"$MGTRAIN_CONFIG_FILE\" && test -s \"$1\"");
  LaunchOutcome outcome = launch_in_process(launch, {});
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.out == "[rank 0] config " + outcome.run_dir + "/config.yaml\n");
}

TEST_CASE("launching again with the same run id does not inherit the old error or heartbeat files",
          "[launch][failure]") {
  TempDir dir;
  LaunchConfig launch = test_launch_config(dir, 1);
  std::string first = write_script(dir / "first.sh",
                                   "echo '{\"message\": \"old failure\"}' > \"$TORCHELASTIC_ERROR_FILE\"; touch "
                                   "\"$MGTRAIN_RUN_DIR/attempt_0/rank_0/heartbeat\"; exit 1");
  CHECK(launch_in_process(launch, {first}).exit_code == 1);
  std::string second = write_script(dir / "second.sh", "sleep 0.5; exit 2");
  launch.hang_timeout = 0.2;  // a stale heartbeat file would count as an opt-in and a hang
  LaunchOutcome outcome = launch_in_process(launch, {second});
  CHECK(outcome.exit_code == 2);
  CHECK_THAT(outcome.err, !Catch::Contains("old failure"));
  YAML::Node report = YAML::Load(read_text(outcome.run_dir + "/failure.json"));
  CHECK(report["root_cause"]["error_file"].IsNull());
}

namespace {

// A real `mgtrain launch --run-id ID` of two ranks that each print a line, touch <dir>/started_<ID>_<rank> and wait
// for <dir>/stop (30 s at most); returned once both ranks started.
ChildProcess start_waiting_launch(const TempDir& dir, const std::string& run_id) {
  const std::string started = dir / ("started_" + run_id);
  const std::string script =
      "echo hello $RANK; touch \"$0_$RANK\"; i=0; while [ ! -e \"$1\" ] && [ $i -lt 300 ]; do sleep 0.1; "
      "i=$((i+1)); done";
  ChildProcess launcher = start_process({kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", run_id, "--nproc",
                                         "2", "--grace-period", "1", "--", "sh", "-c", script, started, dir / "stop"},
                                        dir / ("launcher_" + run_id));
  if (!wait_until([&] { return file_exists(started + "_0") && file_exists(started + "_1"); }, 20s)) {
    kill(launcher.pid, SIGKILL);
    wait_for_exit(launcher.pid, 5s);
    FAIL("the workers of run " << run_id << " did not start: " << read_text(launcher.err_path));
  }
  return launcher;
}

}  // namespace

TEST_CASE("a run folder belongs to its live launcher: a second launch is refused, a dead one's is taken over",
          "[launch][run_id]") {
  TempDir dir;
  const std::string run_dir = dir / "runs/dup";
  ChildProcess first = start_waiting_launch(dir, "dup");
  const std::string record = read_text(run_dir + "/run.json");
  const std::string config = read_text(run_dir + "/config.yaml");
  REQUIRE_THAT(record, Catch::Contains("\"running\""));

  CapturedRun second = mgtrain_launch(dir, {"--run-id", "dup", "--", "sh", "-c", "touch \"$0\"", dir / "second_ran"});
  INFO(second.out << second.err);
  CHECK(second.exit_code == 2);
  CHECK_THAT(second.err, Catch::Contains("run dup is in use") &&
                             Catch::Contains("pid " + std::to_string(first.pid) + " on host ") &&
                             Catch::Contains(run_dir + "/launcher.lock"));
  CHECK_THAT(second.err, !Catch::Contains("launched before"));
  CHECK_FALSE(file_exists(dir / "second_ran"));
  // Nothing of the live run was touched: no archive, the same run record and config, its logs in place.
  CHECK_FALSE(file_exists(run_dir + "/earlier"));
  CHECK(read_text(run_dir + "/run.json") == record);
  CHECK(read_text(run_dir + "/config.yaml") == config);
  CHECK(wait_until([&] { return read_text(run_dir + "/attempt_0/rank_1/stdout.log") == "hello 1\n"; }, 10s));

  // The first run ends as it would have: exit 0, its record says succeeded, still no archive.
  std::ofstream(dir / "stop").put('x');
  CHECK(wait_for_exit(first.pid, 20s) == 0);
  CHECK_THAT(read_text(run_dir + "/run.json"), Catch::Contains("\"succeeded\""));
  CHECK(read_text(run_dir + "/attempt_0/rank_0/stdout.log") == "hello 0\n");
  CHECK_FALSE(file_exists(run_dir + "/earlier"));
  std::filesystem::remove(dir / "stop");

  // A launcher killed by SIGKILL leaves its lock behind in no form: the next launch takes the folder over.
  ChildProcess killed = start_waiting_launch(dir, "stale");
  kill(killed.pid, SIGKILL);
  CHECK(wait_for_exit(killed.pid, 10s) == 128 + SIGKILL);
  std::ofstream(dir / "stop").put('x');  // its workers end too (the orphan guard kills them first)
  CapturedRun third = mgtrain_launch(dir, {"--run-id", "stale", "--", "true"});
  INFO(third.out << third.err);
  CHECK(third.exit_code == 0);
  CHECK_THAT(third.err, Catch::Contains("run stale was launched before; its logs are kept in " + dir.path() +
                                        "/runs/stale/earlier/1"));
  CHECK(file_exists(dir / "runs/stale/earlier/1/attempt_0/rank_0/stdout.log"));
  CHECK(file_exists(dir / "runs/stale/attempt_0/rank_0/stdout.log"));
}
