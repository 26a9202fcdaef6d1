// The --hosts launcher's decisions with made-up times: the first failure and the others' settling time,
// stop and kill on the launcher's signals, forwarding, and the exit code.
#include <catch2/catch.hpp>

#include <csignal>

#include "hosts/hosts_policy.hpp"
#include "supervise/supervision_policy.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

namespace {

const HostsPolicy::Time t0{};

bool is(const HostsOrder& order, HostsAction action, int signal = 0) {
  return order.action == action && order.signal == signal;
}

}  // namespace

TEST_CASE("hosts: every agent succeeding ends the job with 0", "[hosts-policy]") {
  HostsPolicy policy(2, 30);
  CHECK(policy.any_running());
  CHECK(is(policy.on_agent_exit(0, ExitStatus::exited(0), t0 + 1s), HostsAction::kNone));
  CHECK(is(policy.on_agent_exit(1, ExitStatus::exited(0), t0 + 2s), HostsAction::kNone));
  CHECK_FALSE(policy.any_running());
  CHECK_FALSE(policy.next_deadline());
  CHECK(policy.exit_code() == 0);
}

TEST_CASE("hosts: the first failure gives the others grace + 5 s, then SIGTERM, then SIGKILL", "[hosts-policy]") {
  HostsPolicy policy(3, 10);
  CHECK(is(policy.on_agent_exit(1, ExitStatus::exited(3), t0 + 1s), HostsAction::kWaitForOthers));
  CHECK(policy.first_failure() == std::size_t{1});
  REQUIRE(policy.next_deadline());
  CHECK(*policy.next_deadline() == t0 + 16s);
  CHECK(is(policy.on_time(t0 + 15s), HostsAction::kNone));
  // A later failure is not the first one; 0 exits are not failures.
  CHECK(is(policy.on_agent_exit(2, ExitStatus::killed_by(SIGKILL), t0 + 12s), HostsAction::kNone));
  CHECK(is(policy.on_time(t0 + 16s), HostsAction::kStopStragglers, SIGTERM));
  REQUIRE(policy.next_deadline());
  CHECK(*policy.next_deadline() == t0 + 28s);  // grace + 2 s after the stop
  CHECK(is(policy.on_time(t0 + 27s), HostsAction::kNone));
  CHECK(is(policy.on_time(t0 + 28s), HostsAction::kKillAll, SIGKILL));
  CHECK_FALSE(policy.next_deadline());
  policy.on_agent_exit(0, ExitStatus::killed_by(SIGKILL), t0 + 29s);
  CHECK(policy.exit_code() == 3);  // the first failure's, not the stragglers'
}

TEST_CASE("hosts: the others ending in time stop nobody", "[hosts-policy]") {
  HostsPolicy policy(2, 10);
  CHECK(is(policy.on_agent_exit(0, ExitStatus::killed_by(SIGSEGV), t0 + 1s), HostsAction::kWaitForOthers));
  policy.on_agent_exit(1, ExitStatus::exited(1), t0 + 3s);
  CHECK(is(policy.on_time(t0 + 16s), HostsAction::kNone));
  CHECK_FALSE(policy.next_deadline());
  CHECK(policy.exit_code() == 128 + SIGSEGV);
}

TEST_CASE("hosts: exit 75 (saved and stopped on request) is not a failure", "[hosts-policy]") {
  HostsPolicy policy(2, 10);
  CHECK(
      is(policy.on_agent_exit(0, ExitStatus::exited(exit_code::kStoppedAfterCheckpoint), t0 + 1s), HostsAction::kNone));
  CHECK(is(policy.on_agent_exit(1, ExitStatus::exited(0), t0 + 1s), HostsAction::kNone));
  CHECK_FALSE(policy.first_failure());
  CHECK(policy.exit_code() == exit_code::kStoppedAfterCheckpoint);
}

TEST_CASE("hosts: the launcher's signals: stop, a second one kills, USR1/USR2 are passed on", "[hosts-policy]") {
  HostsPolicy policy(2, 10);
  CHECK(is(policy.on_signal(SIGUSR1, t0), HostsAction::kForward, SIGUSR1));
  CHECK(is(policy.on_signal(SIGUSR2, t0), HostsAction::kForward, SIGUSR2));
  CHECK_FALSE(policy.next_deadline());
  CHECK(is(policy.on_signal(SIGINT, t0 + 1s), HostsAction::kStopOnSignal, SIGINT));
  REQUIRE(policy.next_deadline());
  CHECK(*policy.next_deadline() == t0 + 13s);
  // Agents dying of the stop are no "first failure": the exit code is the signal's.
  CHECK(is(policy.on_agent_exit(0, ExitStatus::exited(130), t0 + 2s), HostsAction::kNone));
  CHECK_FALSE(policy.first_failure());
  CHECK(is(policy.on_signal(SIGTERM, t0 + 3s), HostsAction::kKillAll, SIGKILL));
  policy.on_agent_exit(1, ExitStatus::killed_by(SIGKILL), t0 + 3s);
  CHECK(is(policy.on_time(t0 + 13s), HostsAction::kNone));  // nobody left to kill
  CHECK(policy.launcher_signal() == SIGINT);
  CHECK(policy.exit_code() == 130);
}

TEST_CASE("hosts: a signal during the settling time stops everyone at once", "[hosts-policy]") {
  HostsPolicy policy(2, 10);
  CHECK(is(policy.on_agent_exit(0, ExitStatus::exited(2), t0), HostsAction::kWaitForOthers));
  CHECK(is(policy.on_signal(SIGHUP, t0 + 1s), HostsAction::kStopOnSignal, SIGHUP));
  CHECK(*policy.next_deadline() == t0 + 13s);  // the kill deadline comes before the settle deadline
  CHECK(is(policy.on_time(t0 + 13s), HostsAction::kKillAll, SIGKILL));
  CHECK(is(policy.on_time(t0 + 15s), HostsAction::kStopStragglers, SIGTERM));
  CHECK(policy.exit_code() == 128 + SIGHUP);
}

TEST_CASE("hosts: SIGTERM with every agent exiting 75 (their workers saved) ends with 75, else 143", "[hosts-policy]") {
  for (int second_code : {exit_code::kStoppedAfterCheckpoint, 143}) {
    DYNAMIC_SECTION("the other agent exits " << second_code) {
      HostsPolicy policy(2, 10);
      CHECK(is(policy.on_signal(SIGTERM, t0), HostsAction::kStopOnSignal, SIGTERM));
      policy.on_agent_exit(0, ExitStatus::exited(exit_code::kStoppedAfterCheckpoint), t0 + 1s);
      policy.on_agent_exit(1, ExitStatus::exited(second_code), t0 + 1s);
      CHECK(policy.exit_code() == (second_code == exit_code::kStoppedAfterCheckpoint ? 75 : 143));
    }
  }
}
