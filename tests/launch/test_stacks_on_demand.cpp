// The on-demand dump behind POST /stacks (launch/stacks_on_demand.hpp) on real child processes: numbered files that
// keep earlier dumps, not running and busy answers, a rank that ended, a live child dumped and left running; and the
// dump lock it shares with the hang diagnostics (launch/rank_diagnostics.hpp).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "contract/log_layout.hpp"
#include "diagnose/process_facts.hpp"
#include "diagnose/stack_dump.hpp"
#include "launch/rank_diagnostics.hpp"
#include "launch/stacks_on_demand.hpp"
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

StatusSnapshot running_snapshot(const std::string& run_dir, std::vector<std::pair<int, pid_t>> ranks) {
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
  RankDiagnostics node;  // its dump lock: one dump of the node's ranks at a time
  StacksDump dump = dump_stacks_on_demand(snapshot, 5, node.dump_lock());
  CHECK(dump.outcome == StacksOutcome::kNotRunning);
  CHECK_THAT(dump.message, Catch::Contains("stopping"));
  snapshot.phase = "running";
  snapshot.ranks[0].state = "exited";
  CHECK(dump_stacks_on_demand(snapshot, 5, node.dump_lock()).outcome == StacksOutcome::kNotRunning);
  snapshot.ranks[0].state = "running";
  {
    std::lock_guard<std::timed_mutex> hang_dump(node.dump_lock());  // as the hang diagnostics hold it
    dump = dump_stacks_on_demand(snapshot, 5, node.dump_lock());
    CHECK(dump.outcome == StacksOutcome::kBusy);
    CHECK_THAT(dump.message, Catch::Contains("being dumped now"));
  }
  CHECK_FALSE(fs::exists(log_layout::stacks_on_request_file(log_layout::rank_dir(dir.path(), 1, 0), 1)));
}

TEST_CASE("on-demand stacks: a live child is dumped and goes on, one that ended gets a note", "[stacks][on_demand]") {
  testing::TempDir dir("mgtrain-stacks-now");
  SleepingChild child;
  pid_t ended = fork();
  if (ended == 0) _exit(0);
  waitpid(ended, nullptr, 0);
  const StatusSnapshot snapshot = running_snapshot(dir.path(), {{0, child.pid}, {1, ended}});
  const auto started = std::chrono::steady_clock::now();
  RankDiagnostics node;
  StacksDump dump = dump_stacks_on_demand(snapshot, 10, node.dump_lock());
  CHECK(std::chrono::steady_clock::now() - started < 8s);
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
  dump = dump_stacks_on_demand(snapshot, 10, node.dump_lock());
  REQUIRE(dump.outcome == StacksOutcome::kDumped);
  CHECK(dump.ranks[0].stacks_file == log_layout::stacks_on_request_file(log_layout::rank_dir(dir.path(), 1, 0), 2));
  CHECK(fs::exists(first_file));
}

TEST_CASE("hang diagnostics wait for an on-demand dump, until their deadline at most", "[stacks][on_demand]") {
  testing::TempDir dir("mgtrain-stacks-now");
  SleepingChild child;
  const std::string rank_dir = dir / "attempt_0/rank_0";
  fs::create_directories(rank_dir);
  RankDiagnostics diagnostics;
  {
    std::unique_lock<std::timed_mutex> on_demand(diagnostics.dump_lock());
    diagnostics.collect_diagnostics(0, {{0, 0, child.pid, rank_dir, true}}, std::chrono::steady_clock::now() + 300ms);
    std::this_thread::sleep_for(100ms);
    CHECK_FALSE(diagnostics.done());  // waiting for the lock
    std::this_thread::sleep_for(400ms);
  }
  REQUIRE(diagnostics.done());
  REQUIRE_FALSE(diagnostics.last().ranks.empty());
  CHECK_THAT(diagnostics.last().ranks[0].dump.notes.at(0), Catch::Contains("POST /stacks"));
  CHECK_FALSE(fs::exists(log_layout::stacks_file(rank_dir)));
  // free: the next collection dumps
  diagnostics.collect_diagnostics(0, {{0, 0, child.pid, rank_dir, true}}, std::chrono::steady_clock::now() + 10s);
  const auto until = std::chrono::steady_clock::now() + 15s;
  while (!diagnostics.done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
  REQUIRE(diagnostics.done());
  CHECK(fs::exists(log_layout::stacks_file(rank_dir)));
}
