// Hang detection in a multi-node (coordinated) group, with a fake worker group and made-up times: the workers keep
// running after the node's diagnostics until the agent stops them (every node must dump first), and a node asked by
// another (diagnose_on_request) diagnoses its ranks as waiting (docs/diagnosis.md).
#include <catch2/catch.hpp>

#include <csignal>
#include <string>
#include <vector>

#include "supervise/supervision_policy.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

namespace {

struct AgentGroup : WorkerGroupControl {
  std::vector<std::string> log;
  HangVerdict verdict;
  void start_workers(int attempt) override { log.push_back("start " + std::to_string(attempt)); }
  void signal_running_workers(int signal) override { log.push_back("signal " + signal_name(signal)); }
  void group_failing(const WorkerFailure& failure) override {
    log.push_back("failing " + std::to_string(failure.local_rank));
  }
  void hang_detected(const HangVerdict& found, SteadyTime /*deadline*/) override {
    verdict = found;
    log.push_back("hang");
  }
  void hang_diagnosed() override { log.push_back("diagnosed"); }
};

const SteadyTime t0{};

SupervisionPolicy::Settings coordinated_hang(int nproc) {
  SupervisionPolicy::Settings s;
  s.nproc = nproc;
  s.grace_period_s = 2;
  s.hang_timeout_s = 10;
  s.diagnose_timeout_s = 5;
  s.coordinated = true;
  return s;
}

}  // namespace

TEST_CASE("coordinated hang: the workers run after the diagnostics until the agent stops them", "[policy][multinode]") {
  AgentGroup group;
  SupervisionPolicy policy(coordinated_hang(2), group);
  policy.start(t0);
  policy.begin_attempt(0, t0);
  policy.on_progress(0, t0 + 1s, 4);
  policy.on_progress(1, t0 + 2s, 5);
  policy.on_time(t0 + 11s);
  REQUIRE(group.log.back() == "hang");
  CHECK(policy.diagnosing());
  policy.diagnosis_finished(t0 + 12s);
  CHECK(group.log == std::vector<std::string>{"start 0", "hang", "diagnosed"});  // no signal, no failure sent
  CHECK_FALSE(policy.diagnosing());
  CHECK(policy.hang_held());
  CHECK(policy.attempt_running());
  CHECK_FALSE(policy.next_deadline());  // nothing of its own is due: the agent (or its server's silence) decides
  policy.on_time(t0 + 30s);             // long past the diagnose timeout
  CHECK(group.log.back() == "diagnosed");
  CHECK_FALSE(policy.diagnose_on_request(t0 + 30s));  // diagnosed already
  policy.stop_on_request(t0 + 31s);
  CHECK(group.log.back() == "signal SIGTERM");
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 31s);
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 31s);
  CHECK(policy.waiting());
  REQUIRE(policy.record().root_cause());
  CHECK(policy.record().failures()[*policy.record().root_cause()].hung);
  CHECK(policy.record().exit_code() == kHungWorkerExitCode);
}

TEST_CASE("coordinated hang: the diagnose timeout ends this node's diagnostics, not its workers",
          "[policy][multinode]") {
  AgentGroup group;
  SupervisionPolicy policy(coordinated_hang(1), group);
  policy.start(t0);
  policy.begin_attempt(0, t0);
  policy.on_progress(0, t0 + 1s, 1);
  policy.on_time(t0 + 11s);
  REQUIRE(policy.next_deadline());
  CHECK(*policy.next_deadline() == t0 + 16s);
  policy.on_time(t0 + 16s);
  CHECK(group.log.back() == "diagnosed");
  CHECK(policy.hang_held());
}

TEST_CASE("coordinated hang: another node's hang diagnoses every reported rank here as waiting",
          "[policy][multinode]") {
  AgentGroup group;
  SupervisionPolicy policy(coordinated_hang(3), group);
  policy.start(t0);
  CHECK_FALSE(policy.diagnose_on_request(t0));  // between rounds: nothing to diagnose
  policy.begin_attempt(0, t0);
  policy.on_progress(1, t0 + 2s, 7);
  policy.on_progress(0, t0 + 3s, 7);  // rank 2 never reported
  REQUIRE(policy.diagnose_on_request(t0 + 4s));
  CHECK(group.log.back() == "hang");
  CHECK(group.verdict.hung.empty());
  REQUIRE(group.verdict.waiting.size() == 2);
  CHECK(group.verdict.waiting[0].local_rank == 1);  // by last progress
  CHECK(group.verdict.waiting[1].local_rank == 0);
  CHECK(group.verdict.waiting[1].silent_s == Approx(1.0));
  CHECK_FALSE(policy.diagnose_on_request(t0 + 4s));  // diagnosing already
  policy.diagnosis_finished(t0 + 5s);
  CHECK(group.log.back() == "diagnosed");
  // The workers end by themselves before the agent's stop: the attempt ends, the waiting rank is its cause here.
  for (int rank : {0, 1, 2}) policy.on_worker_exit(rank, ExitStatus::exited(1), t0 + 6s);
  CHECK(policy.waiting());
  REQUIRE(policy.record().root_cause());
  CHECK(policy.record().failures()[*policy.record().root_cause()].waiting);
  CHECK(policy.record().exit_code() == kHungWorkerExitCode);
}

TEST_CASE("coordinated hang: asked with no rank reporting, the stacks are still collected and nothing fails here",
          "[policy][multinode]") {
  AgentGroup group;
  SupervisionPolicy policy(coordinated_hang(1), group);
  policy.start(t0);
  policy.begin_attempt(0, t0);
  REQUIRE(policy.diagnose_on_request(t0 + 1s));
  CHECK(group.verdict.waiting.empty());
  policy.on_worker_exit(0, ExitStatus::exited(0), t0 + 2s);  // it ended during the diagnosis
  CHECK(policy.waiting());
  CHECK_FALSE(policy.record().root_cause());
}
