// The torchrun personality's nproc and signal rules: auto on CPUs (launch_plan), --signals-to-handle parsed, and
// signal_response with the policy's orders (stop with the same signal, or stop with SIGTERM and die).
#include <catch2/catch.hpp>

#include <csignal>
#include <numeric>

#include "supervise/launch_plan.hpp"
#include "supervise/supervision_policy.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

namespace {

HostFacts cpu_host(int cpus) {
  HostFacts host;
  host.cpus.affinity.resize(cpus);  // CPUs 0 .. cpus-1
  std::iota(host.cpus.affinity.begin(), host.cpus.affinity.end(), 0);
  host.hostname = "box";
  host.cwd = "/home/alice";
  return host;
}

LaunchConfig with_nproc(const std::string& nproc) {
  LaunchConfig launch;
  launch.run_id = "r1";
  launch.nproc = NprocSpec::parse(nproc).value();
  return launch;
}

struct FakeGroup : WorkerGroupControl {
  std::vector<std::string> log;
  void start_workers(int attempt) override { log.push_back("start " + std::to_string(attempt)); }
  void signal_running_workers(int signal) override { log.push_back("signal " + signal_name(signal)); }
};

SupervisionPolicy::Settings torchrun_settings(std::vector<int> handled) {
  SupervisionPolicy::Settings s;
  s.nproc = 2;
  s.grace_period_s = 5;
  s.personality = Personality::Torchrun;
  s.handled_signals = std::move(handled);
  return s;
}

const SteadyTime t0{};

}  // namespace

TEST_CASE("torchrun personality: nproc auto without a GPU is one worker per CPU, gpu without one is refused",
          "[plan]") {
  const std::vector<std::string> command = {"prog"};
  CHECK(make_launch_plan(with_nproc("auto"), command, cpu_host(6), Strategy::Ddp, Personality::Torchrun).nproc == 6);
  CHECK(make_launch_plan(with_nproc("cpu"), command, cpu_host(6), Strategy::Ddp, Personality::Torchrun).nproc == 6);
  CHECK(make_launch_plan(with_nproc("auto"), command, cpu_host(6)).nproc == 1);  // mgtrain launch
  CHECK_THROWS_AS(make_launch_plan(with_nproc("gpu"), command, cpu_host(6), Strategy::Ddp, Personality::Torchrun),
                  UsageError);
}

TEST_CASE("launch.signals_to_handle becomes signal numbers, each once", "[plan]") {
  CHECK(SignalList::stopping_default().signals == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(SignalList::parse(" SIGUSR1 , SIGTERM,SIGUSR1,").value().signals == std::vector<int>{SIGUSR1, SIGTERM});
  CHECK(SignalList::parse(" SIGUSR1 , SIGTERM,SIGUSR1,").value().text() == "SIGUSR1,SIGTERM");
  CHECK_FALSE(SignalList::parse("SIGTERM,SIGALRM").ok());
  LaunchConfig launch = with_nproc("1");
  launch.signals_to_handle = SignalList::parse("SIGUSR2").value();
  CHECK(make_launch_plan(launch, {"prog"}, cpu_host(1), Strategy::Ddp, Personality::Torchrun).handled_signals ==
        std::vector<int>{SIGUSR2});
}

TEST_CASE("signal_response: mgtrain forwards USR1/USR2, torchrun stops on listed signals, dies by others", "[policy]") {
  const std::vector<int> defaults = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  CHECK(signal_response(SIGTERM, Personality::Mgtrain, {}) == SignalResponse::kStop);
  CHECK(signal_response(SIGUSR1, Personality::Mgtrain, {SIGUSR1}) == SignalResponse::kForward);
  CHECK(signal_response(SIGTERM, Personality::Torchrun, defaults) == SignalResponse::kStop);
  CHECK(signal_response(SIGUSR1, Personality::Torchrun, defaults) == SignalResponse::kStopAndDie);
  CHECK(signal_response(SIGUSR1, Personality::Torchrun, {SIGUSR1}) == SignalResponse::kStop);
  CHECK(signal_response(SIGTERM, Personality::Torchrun, {SIGUSR1}) == SignalResponse::kStopAndDie);
}

TEST_CASE("torchrun personality: a listed SIGUSR1 stops the workers with SIGUSR1, then SIGKILL", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(torchrun_settings({SIGTERM, SIGUSR1}), group);
  policy.start(t0);
  policy.on_signal(SIGUSR1, t0 + 1s);
  CHECK(group.log.back() == "signal SIGUSR1");
  policy.on_time(t0 + 6s);
  CHECK(group.log.back() == "signal SIGKILL");
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGUSR1), t0 + 6s);  // did as asked: no failure
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGKILL), t0 + 6s);
  CHECK(policy.finished());
  CHECK(policy.record().failures().empty());
  CHECK(policy.record().launcher_signal() == SIGUSR1);
}

TEST_CASE("torchrun personality: an unlisted SIGUSR1 stops the workers with SIGTERM (no orphans)", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(torchrun_settings({SIGTERM, SIGINT, SIGHUP, SIGQUIT}), group);
  policy.start(t0);
  policy.on_signal(SIGUSR1, t0 + 1s);
  CHECK(group.log.back() == "signal SIGTERM");
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGTERM), t0 + 2s);
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 2s);
  CHECK(policy.finished());
  CHECK(policy.record().failures().empty());
  CHECK(policy.record().launcher_signal() == SIGUSR1);
}

TEST_CASE("torchrun personality: the status API's save requests are forwarded, not a stop", "[policy]") {
  FakeGroup group;
  SupervisionPolicy policy(torchrun_settings({SIGTERM, SIGINT, SIGHUP, SIGQUIT}), group);
  policy.start(t0);
  policy.forward_to_workers(SIGUSR2);
  CHECK(group.log.back() == "signal SIGUSR2");
  CHECK_FALSE(policy.record().launcher_signal());
  CHECK(policy.attempt_running());
}

TEST_CASE("torchrun personality: an expired file timer's SIGKILL stops the others and the launcher dies by it",
          "[policy][file_timer]") {
  FakeGroup group;
  SupervisionPolicy policy(torchrun_settings({SIGTERM, SIGINT, SIGHUP, SIGQUIT}), group);
  policy.start(t0);
  // The supervisor has sent local rank 0 SIGKILL for its timer; torch's FileTimerServer then kills torchrun.
  policy.on_file_timer_fired(SIGKILL, t0 + 1s);
  CHECK(group.log.back() == "signal SIGTERM");
  CHECK(policy.record().launcher_signal() == SIGKILL);
  CHECK(policy.record().stopped_by_file_timer());
  policy.on_worker_exit(0, ExitStatus::killed_by(SIGKILL), t0 + 1s + 1ms, SIGKILL);
  policy.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 2s);  // did as asked
  CHECK(policy.finished());
  REQUIRE(policy.record().root_cause());
  CHECK(policy.record().failures()[*policy.record().root_cause()].local_rank ==
        0);  // the timer's worker, although the stop had begun
  CHECK(policy.record().exit_code() == 137);
  CHECK(signal_response(SIGKILL, Personality::Torchrun, {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) ==
        SignalResponse::kStopAndDie);
}

TEST_CASE("torchrun personality: a timer's SIGTERM (handled) is a stop with SIGTERM, and mgtrain launch restarts",
          "[policy][file_timer]") {
  FakeGroup group;
  SupervisionPolicy policy(torchrun_settings({SIGTERM, SIGINT, SIGHUP, SIGQUIT}), group);
  policy.start(t0);
  policy.on_file_timer_fired(SIGTERM, t0 + 1s);
  CHECK(group.log.back() == "signal SIGTERM");
  CHECK(policy.record().launcher_signal() == SIGTERM);

  FakeGroup own;
  SupervisionPolicy::Settings settings;
  settings.nproc = 2;
  settings.max_restarts = 1;
  SupervisionPolicy launch(settings, own);  // mgtrain launch: the worker's death is a failure like any other
  launch.start(t0);
  launch.on_file_timer_fired(SIGKILL, t0 + 1s);
  CHECK(!launch.record().launcher_signal());
  launch.on_worker_exit(0, ExitStatus::killed_by(SIGKILL), t0 + 1s, SIGKILL);
  CHECK(own.log.back() == "signal SIGTERM");
  launch.on_worker_exit(1, ExitStatus::killed_by(SIGTERM), t0 + 2s);
  CHECK(own.log.back() == "start 1");  // restarted

  FakeGroup agent;
  SupervisionPolicy::Settings coordinated = torchrun_settings({SIGTERM});
  coordinated.coordinated = true;
  SupervisionPolicy node(coordinated, agent);  // a node agent: a failure, the job decides
  node.start(t0);
  node.begin_attempt(0, t0);
  node.on_file_timer_fired(SIGKILL, t0 + 1s);
  CHECK(!node.record().launcher_signal());
}
