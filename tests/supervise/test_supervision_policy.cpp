// Supervision decisions with a fake worker group and made-up times: stop on failure, escalation,
// restarts, signals, hang watchdog, root cause and exit codes; the one stop/failure rule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include "supervise/supervision_policy.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

namespace {

struct FakeGroup : WorkerGroupControl {
  std::vector<std::string> log;
  bool port_taken = false;  // the answer to store_port_taken
  void start_workers(int attempt) override { log.push_back("start " + std::to_string(attempt)); }
  void signal_running_workers(int signal) override { log.push_back("signal " + signal_name(signal)); }
  void kill_worker(int local_rank) override { log.push_back("kill " + std::to_string(local_rank)); }
  void waiting_for_exit(const std::vector<int>& local_ranks, int signal, SteadyTime kill_at) override {
    log.push_back("waiting for " + rank_list(local_ranks) + " after " + signal_name(signal));
    kill_due = kill_at;
  }
  void not_restarted(const WorkerFailure& root) override {
    log.push_back("not restarted after rank " + std::to_string(root.local_rank));
  }
  SteadyTime kill_due{};
  bool store_port_taken(const WorkerFailure& root) override {
    log.push_back("port taken? rank " + std::to_string(root.local_rank));
    return port_taken;
  }
  std::vector<int> stopped;  // local ranks whose process is stopped (SIGSTOP)
  bool worker_stopped(int local_rank) override {
    return std::find(stopped.begin(), stopped.end(), local_rank) != stopped.end();
  }
  void no_progress_yet(int local_rank) override { log.push_back("no progress yet " + std::to_string(local_rank)); }
  void hang_detected(const HangVerdict& verdict, SteadyTime deadline) override {
    log.push_back("hang " + rank_list({verdict.hung.front().local_rank}));
    diagnose_until = deadline;
  }
  SteadyTime diagnose_until{};
};

const SteadyTime t0{};

SupervisionPolicy::Settings settings(int nproc, int max_restarts = 0, double grace = 5, double hang = 0,
                                     double diagnose = 10) {
  SupervisionPolicy::Settings s;
  s.nproc = nproc;
  s.max_restarts = max_restarts;
  s.grace_period_s = grace;
  s.hang_timeout_s = hang;
  s.diagnose_timeout_s = diagnose;
  return s;
}

}  // namespace

TEST_CASE("all workers succeeding ends the job with 0", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2), group);
  policy.start(t0);
  policy.on_worker_exit(1, ExitStatus::exited(0), t0 + 1s);
  CHECK_FALSE(policy.finished());
  policy.on_worker_exit(0, ExitStatus::exited(0), t0 + 2s);
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == 0);
  CHECK(group.log == std::vector<std::string>{"start 0"});
  CHECK_FALSE(policy.next_deadline());
}

TEST_CASE("a failure stops the group: SIGTERM, then SIGKILL after the grace period", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(3, 0, 5), group);
  policy.start(t0);
  policy.on_worker_exit(1, ExitStatus::exited(3), t0 + 1s);
  CHECK(group.log.back() == "signal SIGTERM");
  REQUIRE(policy.next_deadline());
  CHECK(*policy.next_deadline() == t0 + 6s);
  policy.on_time(t0 + 5s);
  CHECK(group.log.back() == "signal SIGTERM");
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 2s);  // did what it was asked: no failure
  policy.on_time(t0 + 6s);
  CHECK(group.log.back() == "signal SIGKILL");
  policy.on_worker_exit(2, ExitStatus::killed_by(SIGKILL), t0 + 6s + 1ms);
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == 3);
  REQUIRE(policy.record().failures().size() == 1);
  CHECK(policy.record().failures()[*policy.record().root_cause()].local_rank == 1);
}

TEST_CASE("the root cause is the earliest failure, later ones are listed as during teardown", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(3), group);
  policy.start(t0);
  policy.on_worker_exit(2, ExitStatus::killed_by(SIGSEGV), t0 + 1s);
  policy.on_worker_exit(0, ExitStatus::exited(1), t0 + 1s);  // same batch: an independent failure
  policy.on_worker_exit(1, ExitStatus::exited(7), t0 + 2s);  // after the stop began
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == 139);
  REQUIRE(policy.record().failures().size() == 3);
  CHECK(policy.record().failures()[*policy.record().root_cause()].local_rank == 2);
  CHECK_FALSE(policy.record().failures()[1].during_teardown);
  CHECK(policy.record().failures()[2].during_teardown);
}

TEST_CASE("restarts: a failed attempt restarts the whole group while restarts remain", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 1), group);
  policy.start(t0);
  policy.on_worker_exit(1, ExitStatus::exited(3), t0 + 1s);
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 2s);
  CHECK_FALSE(policy.finished());
  CHECK(policy.record().attempt() == 1);
  CHECK(group.log == std::vector<std::string>{"start 0", "signal SIGTERM", "start 1"});
  CHECK_FALSE(policy.next_deadline());  // the old attempt's SIGKILL deadline is gone

  SECTION("and the second attempt succeeds") {
    policy.on_worker_exit(0, ExitStatus::exited(0), t0 + 3s);
    policy.on_worker_exit(1, ExitStatus::exited(0), t0 + 3s);
    CHECK(policy.finished());
    CHECK(policy.record().exit_code() == 0);
    CHECK_FALSE(policy.record().root_cause());
  }
  SECTION("or fails again, and then the job fails") {
    policy.on_worker_exit(0, ExitStatus::exited(4), t0 + 3s);
    policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 4s);
    CHECK(policy.finished());
    CHECK(policy.record().exit_code() == 4);
    CHECK(policy.record().failures()[*policy.record().root_cause()].attempt == 1);
  }
}

TEST_CASE("without restarts the first failure ends the job", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(1, 0), group);
  policy.start(t0);
  policy.on_worker_exit(0, ExitStatus::exited(3), t0 + 1s);
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == 3);
  CHECK(group.log == std::vector<std::string>{"start 0"});  // nobody left to signal
}

TEST_CASE("SIGINT to the launcher is forwarded, a second one kills at once, exit 130", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 3, 30), group);
  policy.start(t0);
  policy.on_signal(SIGINT, t0 + 1s);
  CHECK(group.log.back() == "signal SIGINT");
  policy.on_signal(SIGINT, t0 + 2s);
  CHECK(group.log.back() == "signal SIGKILL");
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGKILL), t0 + 2s + 1ms);
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGINT), t0 + 2s + 1ms);
  CHECK(policy.finished());  // no restart after the launcher was interrupted
  CHECK(policy.record().exit_code() == 130);
  CHECK(policy.record().failures().empty());
}

TEST_CASE("SIGTERM and SIGHUP give 143 and 129, USR1 and USR2 are only forwarded", "[policy]") {
  for (int signal : {SIGTERM, SIGHUP, SIGQUIT}) {
    FakeGroup group;
    SupervisionPolicy policy(settings(1), group);
    policy.start(t0);
    policy.on_signal(SIGUSR1, t0);
    policy.on_signal(SIGUSR2, t0);
    CHECK_FALSE(policy.next_deadline());
    policy.on_signal(signal, t0 + 1s);
    CHECK(group.log ==
          std::vector<std::string>{"start 0", "signal SIGUSR1", "signal SIGUSR2", "signal " + signal_name(signal)});
    policy.on_worker_exit(0, ExitStatus::exited(0), t0 + 2s);
    CHECK(policy.record().exit_code() == 128 + signal);
  }
}

TEST_CASE("a worker exiting 0 after SIGUSR1 is a success", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(1), group);
  policy.start(t0);
  policy.on_signal(SIGUSR1, t0);
  policy.on_worker_exit(0, ExitStatus::exited(0), t0 + 1s);
  CHECK(policy.record().exit_code() == 0);
}

TEST_CASE("hang detection: only workers that reported progress are judged, diagnostics come before the stop",
          "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 0, 5, 10), group);
  policy.start(t0);
  CHECK(*policy.next_deadline() == t0 + 10s);  // when ranks that never reported are told so
  policy.on_progress(0, t0 + 1s);
  policy.on_progress(0, t0 + 4s);
  policy.on_time(t0 + 10s);
  CHECK(group.log == std::vector<std::string>{"start 0", "no progress yet 1"});
  CHECK(*policy.next_deadline() == t0 + 14s);
  policy.on_time(t0 + 13s);
  CHECK(group.log.size() == 2);
  policy.on_time(t0 + 14s);
  CHECK(group.log.back() == "hang rank 0");  // announced, nothing signalled yet
  CHECK(policy.diagnosing());
  CHECK(policy.attempt_running());
  CHECK(group.diagnose_until == t0 + 24s);
  CHECK(*policy.next_deadline() == t0 + 24s);
  policy.on_progress(1, t0 + 14s);  // too late: the hang is decided
  policy.diagnosis_finished(t0 + 15s);
  CHECK(group.log.back() == "signal SIGTERM");
  CHECK_FALSE(policy.diagnosing());
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 15s);
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 15s);
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == kHungWorkerExitCode);
  const WorkerFailure& hang = policy.record().failures()[*policy.record().root_cause()];
  CHECK(hang.hung);
  CHECK(hang.local_rank == 0);
  CHECK(hang.silent_s == Approx(10.0));
}

TEST_CASE("hang detection: the workers are stopped when the diagnostics run out of time, or at once without any",
          "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(1, 0, 5, 2, 3), group);
  policy.start(t0);
  policy.on_progress(0, t0);
  policy.on_time(t0 + 2s);
  CHECK(group.log.back() == "hang rank 0");
  policy.on_time(t0 + 4999ms);
  CHECK(group.log.back() == "hang rank 0");
  policy.on_time(t0 + 5s);
  CHECK(group.log.back() == "signal SIGTERM");
  CHECK(*policy.next_deadline() == t0 + 10s);  // then SIGKILL after the grace period, as for any failure

  FakeGroup quick;
  SupervisionPolicy no_diagnostics(settings(1, 0, 5, 2, 0), quick);
  no_diagnostics.start(t0);
  no_diagnostics.on_progress(0, t0);
  no_diagnostics.on_time(t0 + 2s);
  CHECK(quick.log == std::vector<std::string>{"start 0", "hang rank 0", "signal SIGTERM"});
}

TEST_CASE("hang detection: the root cause is the rank that stopped first, not the first noticed", "[policy]") {
  // Built-in trainer, rank 1 frozen: rank 0 waits in the next all-reduce, its last report happens to be the older
  // one (reports are rate-limited), so rank 0 is the first to be silent for the timeout. The old watchdog named
  // rank 0; rank 1's lower step says it stopped first.
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 0, 5, 10, 0), group);
  policy.start(t0);
  policy.on_progress(0, t0 + 1000ms, 41);
  policy.on_progress(1, t0 + 1150ms, 40);
  policy.on_time(t0 + 11s);
  CHECK(group.log[1] == "hang rank 1");
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 12s);
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 12s);
  CHECK(policy.record().exit_code() == kHungWorkerExitCode);
  const WorkerFailure& root = policy.record().failures()[*policy.record().root_cause()];
  CHECK(root.local_rank == 1);
  CHECK(root.hung);
  CHECK(root.last_step == 40);
  CHECK(root.last_progress == t0 + 1150ms);
  REQUIRE(policy.record().failures().size() == 2);
  CHECK(policy.record().failures()[1].local_rank == 0);
  CHECK(policy.record().failures()[1].waiting);
  CHECK_FALSE(policy.record().failures()[1].hung);
}

TEST_CASE("hang detection: a stopped process is the root cause, same steps and close times say nothing", "[policy]") {
  FakeGroup group;
  group.stopped = {1};
  SupervisionPolicy policy(settings(2, 0, 5, 10, 0), group);
  policy.start(t0);
  policy.on_progress(0, t0 + 1000ms, 41);
  policy.on_progress(1, t0 + 1150ms, 41);
  policy.on_time(t0 + 11s);
  const WorkerFailure& root = policy.record().failures()[*policy.record().root_cause()];
  CHECK(root.local_rank == 1);
  CHECK(root.process_stopped);
}

TEST_CASE("hang detection: a tie that the stacks settle makes the rank outside the collective the root cause",
          "[policy]") {
  // Lock-step ranks stop at the same step; progress names rank 0, the stacks show rank 2 outside any collective.
  FakeGroup group;
  SupervisionPolicy policy(settings(3, 0, 5, 10, 10), group);
  policy.start(t0);
  for (int rank : {0, 1, 2}) policy.on_progress(rank, t0 + 1000ms + std::chrono::milliseconds(10 * rank), 41);
  policy.on_time(t0 + 11s);
  REQUIRE(policy.diagnosing());
  CHECK(policy.record().failures()[*policy.record().root_cause()].local_rank == 0);
  policy.blame(2);
  policy.blame(7);  // not one of the hang's ranks: nothing changes
  policy.diagnosis_finished(t0 + 12s);
  for (int rank : {0, 1, 2}) policy.on_worker_exit(rank, ExitStatus::killed_by(SIGTERM), t0 + 12s);
  CHECK(policy.record().exit_code() == kHungWorkerExitCode);
  const WorkerFailure& root = policy.record().failures()[*policy.record().root_cause()];
  CHECK(root.local_rank == 2);
  CHECK(root.hung);
  CHECK_FALSE(root.waiting);
  int hung = 0;
  for (const WorkerFailure& failure : policy.record().failures()) hung += failure.hung ? 1 : 0;
  CHECK(hung == 1);
  CHECK(policy.record().failures()[1].local_rank == 0);
  CHECK(policy.record().failures()[1].waiting);
}

TEST_CASE("hang detection: workers ending during the diagnostics end the attempt, a signal stops at once", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 1, 5, 2), group);
  policy.start(t0);
  policy.on_progress(0, t0);
  policy.on_progress(1, t0 + 1500ms);
  policy.on_time(t0 + 2s);
  CHECK(policy.diagnosing());
  policy.on_worker_exit(1, ExitStatus::exited(1), t0 + 3s);  // its own failure, later: not the root cause
  CHECK(policy.diagnosing());
  policy.on_worker_exit(0, ExitStatus::exited(1), t0 + 3s);
  CHECK(group.log.back() == "start 1");            // restarted, as after any failure
  CHECK(policy.record().failures().front().hung);  // attempt 0's root cause: the hang, not the exits after it
  CHECK(policy.record().failures().front().local_rank == 0);
  policy.on_progress(0, t0 + 4s);
  policy.on_time(t0 + 6s);
  CHECK(policy.diagnosing());
  policy.on_signal(SIGINT, t0 + 6500ms);
  CHECK(group.log.back() == "signal SIGINT");
}

TEST_CASE("grace period 0 kills at the first tick", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 0, 0), group);
  policy.start(t0);
  policy.on_worker_exit(0, ExitStatus::exited(1), t0 + 1s);
  CHECK(*policy.next_deadline() == t0 + 1s);
  policy.on_time(t0 + 1s);
  CHECK(group.log.back() == "signal SIGKILL");
}

TEST_CASE("workers that saved a checkpoint and stopped on request (exit 75) are no failure and are not restarted",
          "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 3), group);
  policy.start(t0);
  policy.on_signal(SIGUSR1, t0 + 1s);  // forwarded, the job goes on
  CHECK(group.log.back() == "signal SIGUSR1");
  policy.on_worker_exit(1, ExitStatus::exited(75), t0 + 2s);
  CHECK_FALSE(policy.finished());
  CHECK(group.log.back() == "signal SIGUSR1");  // the others are not hurried: they are saving too
  policy.on_worker_exit(0, ExitStatus::exited(75), t0 + 3s);
  CHECK(policy.finished());
  CHECK(policy.record().failures().empty());
  CHECK(policy.record().stopped_after_checkpoint());
  CHECK(policy.record().exit_code() == 75);
  CHECK(group.log == std::vector<std::string>{"start 0", "signal SIGUSR1"});
}

TEST_CASE("SIGTERM to the launcher: workers exiting 75 after saving did what they were asked, the job exits 75",
          "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 3), group);
  policy.start(t0);
  policy.on_signal(SIGTERM, t0 + 1s);
  policy.on_worker_exit(0, ExitStatus::exited(75), t0 + 2s);
  policy.on_worker_exit(1, ExitStatus::exited(75), t0 + 2s);
  CHECK(policy.finished());
  CHECK(policy.record().failures().empty());
  CHECK(policy.record().launcher_signal() == SIGTERM);
  CHECK(policy.record().exit_code() == 75);  // saved: the job can be resumed
}

TEST_CASE("a signal to the launcher: 128+N unless every worker saved and exited 75", "[policy]") {
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    DYNAMIC_SECTION(signal_name(signal)) {
      FakeGroup group;
      SupervisionPolicy policy(settings(2, 3), group);
      policy.start(t0);
      policy.on_signal(signal, t0 + 1s);
      policy.on_worker_exit(0, ExitStatus::exited(75), t0 + 2s);
      policy.on_worker_exit(1, ExitStatus::killed_by(signal), t0 + 2s);  // one did not save
      CHECK(policy.finished());
      CHECK(policy.record().exit_code() == 128 + signal);
    }
  }
  CHECK(stopped_job_exit_code(SIGTERM, true) == 75);
  CHECK(stopped_job_exit_code(SIGINT, true) == 75);
  CHECK(stopped_job_exit_code(SIGTERM, false) == 143);
  CHECK(stopped_job_exit_code(SIGINT, false) == 130);
}

TEST_CASE("a worker's exit 2 (bad input) ends the job at once, restarts left or not, torchrun restarts", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(settings(2, 3), group);
  policy.start(t0);
  policy.on_worker_exit(1, ExitStatus::exited(2), t0 + 1s);
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 2s);
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == 2);
  CHECK(policy.record().attempt() == 0);
  CHECK(group.log == std::vector<std::string>{"start 0", "signal SIGTERM", "not restarted after rank 1"});

  SupervisionPolicy::Settings torchrun = settings(2, 3);
  torchrun.personality = Personality::Torchrun;
  FakeGroup torchrun_group;
  SupervisionPolicy restarting(torchrun, torchrun_group);
  restarting.start(t0);
  restarting.on_worker_exit(1, ExitStatus::exited(2), t0 + 1s);
  restarting.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 2s);
  CHECK_FALSE(restarting.finished());
  CHECK(restarting.record().attempt() == 1);

  FakeGroup last_group;  // no restart left: the job ends as for any failure, nothing more to say
  SupervisionPolicy last(settings(1, 0), last_group);
  last.start(t0);
  last.on_worker_exit(0, ExitStatus::exited(2), t0 + 1s);
  CHECK(last.record().exit_code() == 2);
  CHECK(last_group.log == std::vector<std::string>{"start 0"});

  CHECK_FALSE(restart_can_help(ExitStatus::exited(2), Personality::Mgtrain));
  CHECK(restart_can_help(ExitStatus::exited(2), Personality::Torchrun));
  CHECK(restart_can_help(ExitStatus::exited(1), Personality::Mgtrain));
  CHECK(restart_can_help(ExitStatus::killed_by(2), Personality::Mgtrain));  // SIGINT, not exit 2
}

TEST_CASE("a stop kills a stopped worker at once, and says once whom it still waits for", "[policy]") {
  FakeGroup group;
  group.stopped = {1};
  SupervisionPolicy::Settings s = settings(3, 0, 30);
  s.stop_notice_s = 3;
  SupervisionPolicy policy(s, group);
  policy.start(t0);
  policy.on_worker_exit(2, ExitStatus::exited(1), t0 + 1s);
  CHECK(group.log == std::vector<std::string>{"start 0", "signal SIGTERM", "kill 1"});
  REQUIRE(policy.next_deadline());
  CHECK(*policy.next_deadline() == t0 + 4s);  // the notice, well before SIGKILL
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGKILL), t0 + 1100ms);
  policy.on_time(t0 + 4s);
  CHECK(group.log.back() == "waiting for rank 0 after SIGTERM");
  CHECK(group.kill_due == t0 + 31s);
  CHECK(*policy.next_deadline() == t0 + 31s);
  policy.on_time(t0 + 10s);
  CHECK(group.log.back() == "waiting for rank 0 after SIGTERM");  // once
  CHECK(std::count(group.log.begin(), group.log.end(), "waiting for rank 0 after SIGTERM") == 1);
  policy.on_time(t0 + 31s);
  CHECK(group.log.back() == "signal SIGKILL");
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGKILL), t0 + 31s);
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == 1);
  CHECK(policy.record().failures().size() == 1);  // the stopped rank died of the launcher's SIGKILL: no failure

  FakeGroup quick;  // everyone gone before the notice: nothing said
  SupervisionPolicy short_stop(s, quick);
  short_stop.start(t0);
  short_stop.on_worker_exit(0, ExitStatus::exited(1), t0 + 1s);
  short_stop.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 1100ms);
  short_stop.on_worker_exit(2, ExitStatus::killed_by(SIGTERM), t0 + 1100ms);
  CHECK_FALSE(short_stop.next_deadline());
  CHECK(quick.log == std::vector<std::string>{"start 0", "signal SIGTERM"});

  FakeGroup brief;  // a short grace period: the notice comes half-way
  SupervisionPolicy::Settings short_grace = s;
  short_grace.grace_period_s = 2;
  SupervisionPolicy half(short_grace, brief);
  half.start(t0);
  half.on_worker_exit(0, ExitStatus::exited(1), t0 + 1s);
  CHECK(*half.next_deadline() == t0 + 2s);
}

TEST_CASE("a hang with a stopped rank: its stacks first, then SIGKILL for it and SIGTERM for the others", "[policy]") {
  FakeGroup group;
  group.stopped = {1};
  SupervisionPolicy policy(settings(2, 0, 600, 10, 5), group);
  policy.start(t0);
  policy.on_progress(0, t0 + 1000ms, 41);
  policy.on_progress(1, t0 + 1150ms, 41);
  policy.on_time(t0 + 11s);
  REQUIRE(policy.diagnosing());
  CHECK(group.log == std::vector<std::string>{"start 0", "hang rank 1"});  // nothing signalled while diagnosing
  policy.diagnosis_finished(t0 + 12s);
  CHECK(group.log == std::vector<std::string>{"start 0", "hang rank 1", "signal SIGTERM", "kill 1"});
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGKILL), t0 + 12s + 1ms);
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 12s + 1ms);
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == kHungWorkerExitCode);
}

namespace {

// The node agent's view of a coordinated (multi-node) group.
struct FakeCoordinatedGroup : FakeGroup {
  std::vector<int> failing_ranks;
  std::vector<int> failing_attempts;
  int ended = 0;
  void group_failing(const WorkerFailure& failure) override {
    failing_ranks.push_back(failure.local_rank);
    failing_attempts.push_back(failure.attempt);
  }
  void attempt_ended() override { ++ended; }
};

SupervisionPolicy::Settings coordinated(int nproc) {
  SupervisionPolicy::Settings s = settings(nproc, 5, 2);
  s.coordinated = true;
  return s;
}

}  // namespace

TEST_CASE("coordinated: attempts start when the agent says, a failure is reported once, the agent picks the exit code",
          "[policy][multinode]") {
  FakeCoordinatedGroup group;
  SupervisionPolicy policy(coordinated(2), group);
  policy.start(t0);
  CHECK(policy.waiting());
  CHECK(group.log.empty());  // no workers before the nodes have met
  policy.begin_attempt(3, t0 + 1s);
  CHECK(group.log == std::vector<std::string>{"start 3"});
  CHECK(policy.record().attempt() == 3);
  policy.on_worker_exit(1, ExitStatus::exited(9), t0 + 2s);
  CHECK(group.failing_ranks == std::vector<int>{1});
  // The attempt's own: the agent's report names that attempt's worker (a node that joined at round 3 as a standby
  // has started no worker in attempt 0).
  CHECK(group.failing_attempts == std::vector<int>{3});
  CHECK(group.log.back() == "signal SIGTERM");
  policy.on_worker_exit(0, ExitStatus::exited(4), t0 + 3s);  // during teardown: not reported again
  CHECK(group.failing_ranks.size() == 1);
  CHECK(group.ended == 1);
  CHECK(policy.waiting());  // no restart of its own, even with max_restarts 5
  CHECK_FALSE(policy.record().attempt_succeeded());
  CHECK(policy.record().exit_code() == 9);  // the local root cause, until the agent decides
  policy.finish_coordinated(7);             // the job's root cause was elsewhere
  CHECK(policy.finished());
  CHECK(policy.record().exit_code() == 7);
}

TEST_CASE("coordinated: a stop ordered by another node is not a failure here", "[policy][multinode]") {
  FakeCoordinatedGroup group;
  SupervisionPolicy policy(coordinated(2), group);
  policy.start(t0);
  policy.begin_attempt(0, t0);
  policy.stop_on_request(t0 + 1s);
  CHECK(group.log.back() == "signal SIGTERM");
  REQUIRE(policy.next_deadline());
  CHECK(*policy.next_deadline() == t0 + 3s);  // SIGKILL after the grace period
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 2s);
  policy.on_time(t0 + 3s);
  CHECK(group.log.back() == "signal SIGKILL");
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGKILL), t0 + 3s + 1ms);
  CHECK(group.ended == 1);
  CHECK(group.failing_ranks.empty());
  CHECK_FALSE(policy.record().root_cause());
  CHECK_FALSE(policy.record().attempt_succeeded());
  policy.begin_attempt(1, t0 + 4s);  // the next round
  policy.on_worker_exit(0, ExitStatus::exited(0), t0 + 5s);
  policy.on_worker_exit(1, ExitStatus::exited(exit_code::kStoppedAfterCheckpoint), t0 + 5s);
  CHECK(policy.record().attempt_succeeded());
  CHECK(policy.record().stopped_after_checkpoint());
}

TEST_CASE("coordinated: a signal between rounds ends the agent at once", "[policy][multinode]") {
  FakeCoordinatedGroup group;
  SupervisionPolicy policy(coordinated(1), group);
  policy.start(t0);
  policy.on_signal(SIGINT, t0 + 1s);
  CHECK(policy.finished());
  CHECK(group.ended == 1);  // the agent tells the others it leaves
  CHECK(policy.record().exit_code() == 130);
}

TEST_CASE("the one rule: which signals stop the job, which exits fail it", "[policy]") {
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    CHECK(stops_the_job(signal));
    CHECK(stopped_by_signal(128 + signal));
    CHECK(stopped_exit_code(signal) == 128 + signal);
    CHECK(stopped_by_signal(stopped_exit_code(signal)));
  }
  CHECK(stopped_exit_code(SIGINT) == 130);
  CHECK(stopped_exit_code(SIGTERM) == 143);
  for (int signal : {SIGUSR1, SIGUSR2, SIGCHLD, SIGKILL}) CHECK_FALSE(stops_the_job(signal));
  CHECK_FALSE(stopped_by_signal(128 + SIGKILL));
  CHECK_FALSE(stopped_by_signal(0));
  CHECK_FALSE(stopped_by_signal(SIGINT));
  CHECK_FALSE(failed_exit(ExitStatus::exited(0)));
  CHECK_FALSE(failed_exit(ExitStatus::exited(exit_code::kStoppedAfterCheckpoint)));
  CHECK(failed_exit(ExitStatus::exited(1)));
  CHECK(failed_exit(ExitStatus::killed_by(exit_code::kStoppedAfterCheckpoint)));
  CHECK(failed_exit(ExitStatus::killed_by(SIGTERM)));
}

TEST_CASE("rank 0 finding its store port taken: a port retry, not counted as a restart", "[policy][port]") {
  FakeGroup group;
  group.port_taken = true;
  SupervisionPolicy::Settings s = settings(2, 0);
  s.max_port_retries = 2;
  SupervisionPolicy policy(s, group);
  policy.start(t0);
  policy.on_worker_exit(0, ExitStatus::exited(1), t0 + 1s);
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 1s + 1ms);
  CHECK(group.log == std::vector<std::string>{"start 0", "signal SIGTERM", "port taken? rank 0", "start 1"});
  CHECK(policy.record().attempt() == 1);
  CHECK(policy.record().restarts() == 0);
  CHECK(policy.record().port_retries() == 1);

  SECTION("the retry succeeds") {
    policy.on_worker_exit(0, ExitStatus::exited(0), t0 + 2s);
    policy.on_worker_exit(1, ExitStatus::exited(0), t0 + 2s);
    CHECK(policy.finished());
    CHECK(policy.record().exit_code() == 0);
  }
  SECTION("retries are bounded: then the ordinary failure (no restart left)") {
    policy.on_worker_exit(0, ExitStatus::exited(1), t0 + 2s);
    policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 2s + 1ms);
    CHECK(policy.record().port_retries() == 2);
    policy.on_worker_exit(0, ExitStatus::exited(1), t0 + 3s);
    policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 3s + 1ms);
    CHECK(policy.finished());
    CHECK(policy.record().exit_code() == 1);
    CHECK(policy.record().attempt() == 2);
    CHECK(policy.record().restarts() == 0);
    CHECK(group.log.back() == "signal SIGTERM");  // not asked again once the retries are used up
  }
}

TEST_CASE("a failure that is not a taken store port is an ordinary, counted restart", "[policy][port]") {
  FakeGroup group;
  SupervisionPolicy::Settings s = settings(2, 1);
  s.max_port_retries = 5;
  SupervisionPolicy policy(s, group);
  policy.start(t0);
  policy.on_worker_exit(1, ExitStatus::exited(3), t0 + 1s);
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 1s + 1ms);
  CHECK(group.log == std::vector<std::string>{"start 0", "signal SIGTERM", "port taken? rank 1", "start 1"});
  CHECK(policy.record().restarts() == 1);
  CHECK(policy.record().port_retries() == 0);

  SECTION("without port retries (a port the user gave) the control is not even asked") {
    FakeGroup given;
    given.port_taken = true;
    SupervisionPolicy strict(settings(1, 0), given);
    strict.start(t0);
    strict.on_worker_exit(0, ExitStatus::exited(1), t0 + 1s);
    CHECK(strict.finished());
    CHECK(given.log == std::vector<std::string>{"start 0"});
  }
}
