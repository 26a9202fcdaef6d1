// The supervisor's hang diagnostics hook with real worker processes: a hung group is announced, the hook
// (HangDiagnostics) is called once with every running rank and its deadline before any worker gets SIGTERM, the
// workers are stopped once it is done, and the stacks file it wrote is named in the failure report.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "contract/log_layout.hpp"
#include "host/port_probe.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/supervisor.hpp"
#include "support/temp_dir.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Records its calls; "dumps stacks" (writes stacks.txt) and is done 0.5 s after it was called.
struct FakeDiagnostics : HangDiagnostics {
  std::string run_dir;
  int calls = 0;
  int attempt = -1;
  std::vector<Target> ranks;
  Clock::time_point called_at{}, deadline{}, done_at{};
  bool terminated_before_call = false;
  bool terminated_before_done = false;
  bool reported_done = false;

  bool any_terminated() const { return fs::exists(run_dir + "/term_0") || fs::exists(run_dir + "/term_1"); }
  void collect_diagnostics(int attempt_number, const std::vector<Target>& targets, Clock::time_point until) override {
    ++calls;
    attempt = attempt_number;
    ranks = targets;
    deadline = until;
    called_at = Clock::now();
    done_at = called_at + 500ms;
    terminated_before_call = any_terminated();
    for (const Target& target : targets) std::ofstream(log_layout::stacks_file(target.rank_directory)) << "stacks\n";
  }
  bool done() override {
    if (Clock::now() < done_at) return false;
    if (!reported_done) terminated_before_done = any_terminated();
    reported_done = true;
    return true;
  }
  std::string activity() const override { return "collecting stacks"; }
};

}  // namespace

TEST_CASE("a hang is announced, diagnosed before SIGTERM, and its stacks file is in the report", "[hang][supervisor]") {
  const testing::TempDir dir("mgtrain-hang-diagnostics");
  LaunchConfig launch;
  launch.run_id = "hang";
  launch.log_dir = dir.path();
  launch.nproc = NprocSpec::workers(2);
  launch.hang_timeout = 0.5;
  launch.diagnose_timeout = 5;
  launch.grace_period = 5;
  HostFacts host;
  host.cpus.affinity.resize(2);  // CPUs 0 .. 2-1
  std::iota(host.cpus.affinity.begin(), host.cpus.affinity.end(), 0);
  host.hostname = "box";
  host.cwd = dir.path();
  // Rank 0 reports once at once, rank 1 a little later; then both go quiet until SIGTERM, which they record.
  const std::vector<std::string> command = {
      "/bin/sh", "-c",
      "trap 'touch \"$MGTRAIN_RUN_DIR/term_$RANK\"; exit 143' TERM; [ \"$RANK\" = 1 ] && sleep 0.2; "
      "echo 1 > \"$MGTRAIN_HEARTBEAT_FILE\"; while :; do sleep 0.05; done"};
  const LaunchPlan plan = make_launch_plan(launch, command, host);
  SocketPortProbe ports;
  const int port = ports.pick_free_port();
  Fd console(open((dir / "console").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(console.valid());
  FakeDiagnostics diagnostics;
  diagnostics.run_dir = plan.run_dir;
  SupervisionResult result;
  const Clock::time_point started = Clock::now();
  {
    Supervisor supervisor(plan, {{"PATH", "/usr/bin:/bin"}}, "", ports, port, console.get(), console.get());
    supervisor.set_diagnostics(diagnostics);
    result = supervisor.run();
  }
  std::ifstream in(dir / "console");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(text);
  CHECK(result.exit_code == 124);
  CHECK(diagnostics.calls == 1);
  CHECK(diagnostics.attempt == 0);
  REQUIRE(diagnostics.ranks.size() == 2);
  CHECK(diagnostics.ranks[0].hung);
  CHECK_FALSE(diagnostics.ranks[1].hung);
  CHECK(diagnostics.ranks[1].rank_directory == log_layout::rank_dir(plan.run_dir, 0, 1));
  CHECK(diagnostics.ranks[0].pid > 0);
  CHECK(diagnostics.called_at - started >= 500ms);
  CHECK(std::chrono::duration<double>(diagnostics.deadline - diagnostics.called_at).count() == Approx(5).margin(0.2));
  CHECK_FALSE(diagnostics.terminated_before_call);
  CHECK(diagnostics.reported_done);  // polled while the workers still ran
  CHECK_FALSE(diagnostics.terminated_before_done);
  CHECK(fs::exists(plan.run_dir + "/term_0"));       // stopped after the diagnostics, by SIGTERM
  CHECK(Clock::now() - diagnostics.called_at < 4s);  // when they were done, not at the deadline
  CHECK_THAT(text, Catch::Contains("rank 0 hung: no progress for") &&
                       Catch::Contains("collecting stacks before stopping the workers (up to 5 s)"));
  REQUIRE(result.failure);
  CHECK(result.failure->root_cause.hung);
  CHECK(result.failure->root_cause.stacks == log_layout::stacks_file(log_layout::rank_dir(plan.run_dir, 0, 0)));
  CHECK(result.failure->root_cause.last_step == 1);
}
