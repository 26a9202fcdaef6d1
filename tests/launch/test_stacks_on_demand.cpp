// The on-demand dump behind POST /stacks (launch/stacks_on_demand.hpp) on real child processes: numbered files that
// keep earlier dumps, not running and busy answers, a rank that ended, a live child dumped and left running; and the
// node's one dumping room it shares with the hang diagnostics (launch/rank_diagnostics.hpp), on an event loop.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "contract/log_layout.hpp"
#include "diagnose/process_facts.hpp"
#include "diagnose/stack_dump.hpp"
#include "launch/rank_diagnostics.hpp"
#include "launch/stacks_on_demand.hpp"
#include "support/loop_runner.hpp"
#include "support/temp_dir.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A child of this process that sleeps until killed.
struct SleepingChild {
  pid_t pid = -1;
  SleepingChild() {
    pid = fork();
    if (pid == 0) {
      execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
      _exit(127);
    }
    std::this_thread::sleep_for(100ms);  // exec'ed
  }
  ~SleepingChild() {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

// Dump options whose "eu-stack" is a script that says it started, then waits for <dir>/release and prints nothing:
// a dump that lasts as long as the test wants.
diagnose::DumpOptions slow_eu_stack(const std::string& dir) {
  const std::string script = dir + "/slow-eu-stack";
  std::ofstream(script) << "#!/bin/sh\ntouch '" << dir << "/eu-stack-started'\nwhile [ ! -e '" << dir
                        << "/release' ]; do sleep 0.05; done\n";
  fs::permissions(script, fs::perms::owner_all);
  return diagnose::DumpOptions{script};
}

// POST /stacks as the status server's HTTP thread sends it, while this thread turns the loop.
StacksDump ask(testing::LoopRunner& runner, RankDiagnostics& node, const StatusSnapshot& snapshot, double timeout_s) {
  StacksDump dump;
  std::atomic<bool> answered{false};
  std::thread http([&] {
    dump = node.request_stacks(snapshot, timeout_s);
    answered = true;
  });
  runner.run_until([&] { return answered.load(); }, std::chrono::seconds(60));
  http.join();
  return dump;
}

StatusSnapshot running_snapshot(const std::string& run_dir, const std::vector<std::pair<int, pid_t>>& ranks) {
  StatusSnapshot snapshot;
  snapshot.run_id = "r";
  snapshot.run_dir = run_dir;
  snapshot.attempt = 1;
  snapshot.phase = "running";
  for (const auto& [rank, pid] : ranks) {
    RankStatus status;
    status.rank = rank;
    status.local_rank = rank;
    status.pid = pid;
    status.state = "running";
    snapshot.ranks.push_back(status);
    fs::create_directories(log_layout::rank_dir(run_dir, 1, rank));
  }
  return snapshot;
}

}  // namespace

TEST_CASE("on-demand stacks: the next number is free in every rank folder", "[stacks][on_demand]") {
  testing::TempDir dir("mgtrain-stacks-now");
  const std::string a = dir / "rank_0", b = dir / "rank_1";
  fs::create_directories(a);
  fs::create_directories(b);
  CHECK(log_layout::stacks_on_request_file(a, 4) == a + "/stacks-4.txt");
  CHECK(next_stacks_number({a, b}) == 1);
  std::ofstream(log_layout::stacks_on_request_file(a, 1)).close();
  CHECK(next_stacks_number({a, b}) == 2);
  std::ofstream(log_layout::stacks_on_request_file(b, 2)).close();
  CHECK(next_stacks_number({a, b}) == 3);
  std::ofstream(log_layout::stacks_file(a)).close();  // the hang report's file does not count
  CHECK(next_stacks_number({a, b}) == 3);
}

TEST_CASE("on-demand stacks: nothing runs, or another dump runs: no files, a clear answer", "[stacks][on_demand]") {
  testing::TempDir dir("mgtrain-stacks-now");
  SleepingChild child;
  StatusSnapshot snapshot = running_snapshot(dir.path(), {{0, child.pid}});
  snapshot.phase = "stopping";
  testing::LoopRunner runner;
  RankDiagnostics node(slow_eu_stack(dir.path()));  // the node's one dumping room
  runner.add(node);
  StacksDump dump = ask(runner, node, snapshot, 5);
  CHECK(dump.outcome == StacksOutcome::kNotRunning);
  CHECK_THAT(dump.message, Catch::Contains("stopping"));
  snapshot.phase = "running";
  snapshot.ranks[0].state = "exited";
  CHECK(ask(runner, node, snapshot, 5).outcome == StacksOutcome::kNotRunning);
  snapshot.ranks[0].state = "running";
  const std::string hang_rank_dir = dir / "attempt_0/rank_0";
  fs::create_directories(hang_rank_dir);
  // A hang's collection runs (its eu-stack waits for the release file): the request is answered busy at once.
  node.collect_diagnostics(0, {{0, 0, child.pid, hang_rank_dir, true}}, std::chrono::steady_clock::now() + 60s);
  dump = ask(runner, node, snapshot, 5);
  CHECK(dump.outcome == StacksOutcome::kBusy);
  CHECK_THAT(dump.message, Catch::Contains("being dumped now"));
  CHECK_FALSE(fs::exists(log_layout::stacks_on_request_file(log_layout::rank_dir(dir.path(), 1, 0), 1)));
  std::ofstream(dir / "release").close();
  REQUIRE(runner.run_until([&] { return node.done(); }, 30s));
  CHECK(fs::exists(log_layout::stacks_file(hang_rank_dir)));
  // Once the loop has ended, a request is answered at once.
  runner.remove(node);
  node.close_requests();
  CHECK(node.request_stacks(snapshot, 5).outcome == StacksOutcome::kNotRunning);
}

TEST_CASE("on-demand stacks: a live child is dumped and goes on, one that ended gets a note", "[stacks][on_demand]") {
  testing::TempDir dir("mgtrain-stacks-now");
  SleepingChild child;
  pid_t ended = fork();
  if (ended == 0) _exit(0);
  waitpid(ended, nullptr, 0);
  const StatusSnapshot snapshot = running_snapshot(dir.path(), {{0, child.pid}, {1, ended}});
  testing::LoopRunner runner;
  RankDiagnostics node;
  runner.add(node);
  StacksDump dump = ask(runner, node, snapshot, 10);
  REQUIRE(dump.outcome == StacksOutcome::kDumped);
  CHECK(dump.attempt == 1);
  REQUIRE(dump.ranks.size() == 2);
  const RankStacks& live = dump.ranks[0];
  CHECK(live.pid == child.pid);
  CHECK(live.stacks_file == log_layout::stacks_on_request_file(log_layout::rank_dir(dir.path(), 1, 0), 1));
  CHECK(fs::exists(live.stacks_file));
  CHECK_FALSE(fs::exists(log_layout::stacks_file(log_layout::rank_dir(dir.path(), 1, 0))));
  if (!diagnose::find_program("eu-stack", getenv("PATH") ? getenv("PATH") : "").empty()) {
    INFO((live.notes.empty() ? std::string() : live.notes[0]));
    CHECK(live.outcome == "complete");
    CHECK(live.native_frames);
    CHECK_FALSE(live.top_frames.empty());
  } else {
    WARN("eu-stack not installed: native frames not checked");
  }
  const RankStacks& gone = dump.ranks[1];
  CHECK(gone.outcome == "failed");
  CHECK(gone.stacks_file.empty());
  REQUIRE(gone.notes.size() == 1);
  CHECK_THAT(gone.notes[0], Catch::Contains("rank 1") && Catch::Contains("ended before"));
  // the child was not stopped or killed
  CHECK(diagnose::process_state(child.pid).value_or('Z') != 'T');
  CHECK(waitpid(child.pid, nullptr, WNOHANG) == 0);
  // a second dump keeps the first
  const std::string first_file = live.stacks_file;
  dump = ask(runner, node, snapshot, 10);
  REQUIRE(dump.outcome == StacksOutcome::kDumped);
  CHECK(dump.ranks[0].stacks_file == log_layout::stacks_on_request_file(log_layout::rank_dir(dir.path(), 1, 0), 2));
  CHECK(fs::exists(first_file));
  runner.remove(node);
}

TEST_CASE("hang diagnostics wait for an on-demand dump, until their deadline at most", "[stacks][on_demand]") {
  testing::TempDir dir("mgtrain-stacks-now");
  SleepingChild child;
  const StatusSnapshot snapshot = running_snapshot(dir.path(), {{0, child.pid}});
  const std::string rank_dir = dir / "attempt_0/rank_0";
  fs::create_directories(rank_dir);
  testing::LoopRunner runner;
  RankDiagnostics diagnostics(slow_eu_stack(dir.path()));
  runner.add(diagnostics);
  // An on-demand dump runs (its eu-stack waits for the release file) when the hang is found.
  StacksDump on_demand;
  std::thread asker([&] { on_demand = diagnostics.request_stacks(snapshot, 30); });
  REQUIRE(runner.run_until([&] { return fs::exists(dir / "eu-stack-started"); }, 30s));
  const auto deadline = std::chrono::steady_clock::now() + 300ms;
  diagnostics.collect_diagnostics(0, {{0, 0, child.pid, rank_dir, true}}, deadline);
  runner.run_until([&] { return std::chrono::steady_clock::now() > deadline + 100ms; }, 10s);
  CHECK_FALSE(diagnostics.done());  // waiting for the on-demand dump
  std::ofstream(dir / "release").close();
  REQUIRE(runner.run_until([&] { return diagnostics.done(); }, 30s));
  asker.join();
  CHECK(on_demand.outcome == StacksOutcome::kDumped);
  REQUIRE_FALSE(diagnostics.last().ranks.empty());
  CHECK_THAT(diagnostics.last().ranks[0].dump.notes.at(0), Catch::Contains("POST /stacks"));
  CHECK_FALSE(fs::exists(log_layout::stacks_file(rank_dir)));
  // free: the next collection dumps
  diagnostics.collect_diagnostics(0, {{0, 0, child.pid, rank_dir, true}}, std::chrono::steady_clock::now() + 10s);
  REQUIRE(runner.run_until([&] { return diagnostics.done(); }, 30s));
  CHECK(fs::exists(log_layout::stacks_file(rank_dir)));
  runner.remove(diagnostics);
}
