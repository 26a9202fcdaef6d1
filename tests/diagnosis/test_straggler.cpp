// Straggler detection end to end (docs/diagnosis.md#stragglers): the real `mgtrain` launching 4 Python
// workers that write their step counts into their progress files (rank 0 as heartbeat lines, the others as decimal
// counts), paced by the clock, one of them ~30 % slower by an injected sleep. The slow rank must be flagged
// (console warning, /status, /metrics, run.json) well within 60 s; equal ranks must not be, over several
// windows, while their step rates are measured; launch.straggler_detection=false turns it off. Short windows
// (launch.straggler_window=8 or 6, 4 s with detection off) keep each case under 45 s, 10-30 s on a quiet machine.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "integration/launch_fixture.hpp"
#include "support/prometheus_text.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// The body of a plain HTTP/1.1 GET on loopback ("" when there is no 200 answer).
std::string http_get(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string text;
  char buffer[65536];
  ssize_t got;
  while ((got = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
  close(fd);
  const std::size_t body = text.find("\r\n\r\n");
  if (text.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) return "";
  return text.substr(body + 4);
}

// Workers stepping every 20 ms for `seconds` (rank SLOW_RANK every 20 / 0.7 ms: the injected sleep), each step
// written at its due time so the machine's load does not change the rates.
std::string paced_worker(const TempDir& dir, double seconds) {
  return write_script(dir / "worker.sh", R"SH(
exec python3 - )SH" + std::to_string(seconds) +
                                             R"SH( <<'EOF'
import os, sys, time
period = 0.02
if os.environ.get("SLOW_RANK") == os.environ["RANK"]:
    period /= 0.7
path = os.environ["MGTRAIN_HEARTBEAT_FILE"]
start = time.monotonic()
step = 0
while time.monotonic() - start < float(sys.argv[1]):
    step += 1
    time.sleep(max(0.0, start + step * period - time.monotonic()))
    line = '{"step":%d,"loss":1.5,"time":%f}' % (step, time.time()) if os.environ["RANK"] == "0" else "%d" % step
    with open(path + ".tmp", "w") as f:
        f.write(line + "\n")
    os.replace(path + ".tmp", path)
EOF
)SH");
}

struct StragglerRun {
  TempDir dir{"mgtrain-straggler"};
  int port = free_port();
  ChildProcess launcher;
  std::string run_dir = dir / "runs/s";

  StragglerRun(const std::string& slow_rank, double seconds, const std::vector<std::string>& settings) {
    std::vector<std::string> argv = {kMgtrain,    "launch",     "--nproc",  "4", "--status-port",  std::to_string(port),
                                     "--log-dir", dir / "runs", "--run-id", "s", "--grace-period", "2"};
    argv.insert(argv.end(), settings.begin(), settings.end());
    argv.push_back("--");
    argv.push_back(paced_worker(dir, seconds));
    launcher = start_process(argv, dir / "launcher", {{"SLOW_RANK", slow_rank}});
  }
  ~StragglerRun() {
    if (kill(launcher.pid, 0) == 0) {
      kill(launcher.pid, SIGTERM);
      if (!wait_for_exit(launcher.pid, 10s)) {
        kill(launcher.pid, SIGKILL);
        wait_for_exit(launcher.pid, 5s);
      }
    }
  }
  nlohmann::json status() const {
    const std::string body = http_get(port, "/status");
    return body.empty() ? nlohmann::json() : nlohmann::json::parse(body);
  }
  std::map<std::string, double> metric(const std::string& name) const {
    std::vector<PrometheusSample> samples;
    const std::vector<std::string> problems = prometheus_text_problems(http_get(port, "/metrics"), &samples);
    for (const std::string& problem : problems) FAIL_CHECK(problem);
    std::map<std::string, double> by_rank;
    for (const PrometheusSample& sample : samples) {
      if (sample.name == name) by_rank[sample.labels.at("rank")] = sample.value;
    }
    return by_rank;
  }
  std::string console() const { return read_text(launcher.err_path) + read_text(launcher.out_path); }
};

bool flagged_in_status(const nlohmann::json& status, int rank) {
  if (!status.is_object()) return false;
  for (const auto& r : status["ranks"]) {
    if (r["rank"].get<int>() == rank) return r["straggler"].get<bool>();
  }
  return false;
}

}  // namespace

TEST_CASE("a rank ~30 % slower is flagged: console, /status, /metrics, run.json", "[diagnosis][straggler]") {
  StragglerRun run("2", 60, {"launch.straggler_window=8"});
  const auto started = std::chrono::steady_clock::now();
  const bool flagged = wait_until([&] { return flagged_in_status(run.status(), 2); }, 45s);
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("launcher console:\n" << run.console());
  REQUIRE(flagged);
  CHECK(after < 45);  // 8 s windows: flagged about 9 s after the first steps on a quiet machine

  const nlohmann::json status = run.status();
  CHECK(status["straggler_detection"].get<bool>());
  // Every rank has a rate (50 and 35 steps/s in the long run; not checked as such: a loaded machine delays the
  // workers, who then catch up in bursts), only rank 2 is flagged.
  for (const auto& rank : status["ranks"]) {
    CAPTURE(rank.dump());
    REQUIRE(rank["step_rate"].is_number());
    CHECK(rank["step_rate"].get<double>() > 0);
    CHECK(rank["straggler"].get<bool>() == (rank["rank"].get<int>() == 2));
  }
  const std::map<std::string, double> straggler = run.metric("mgtrain_rank_straggler");
  CHECK(straggler == std::map<std::string, double>{{"0", 0}, {"1", 0}, {"2", 1}, {"3", 0}});
  CHECK(run.metric("mgtrain_rank_step_rate").size() == 4);

  REQUIRE(wait_until([&] { return run.console().find("rank 2 is a straggler") != std::string::npos; }, 5s));
  const std::string console = run.console();
  const std::size_t line_start = console.rfind('\n', console.find("rank 2 is a straggler")) + 1;
  const std::string line = console.substr(line_start, console.find('\n', line_start) - line_start);
  CHECK_THAT(line, Catch::Matches(R"(mgtrain: warning: rank 2 is a straggler: \d+\.\d+ steps/s against a median of )"
                                  R"(\d+\.\d+ \(\d\d % slower\) over the last 8 s)"));
  CHECK(run.console().find("rank 0 is a straggler") == std::string::npos);

  const nlohmann::json record = nlohmann::json::parse(read_text(run.run_dir + "/run.json"));
  REQUIRE(record.contains("stragglers"));
  REQUIRE(record["stragglers"].size() == 1);
  CHECK(record["stragglers"][0]["rank"].get<int>() == 2);
  CHECK(record["stragglers"][0]["end"].is_null());  // still lasting
  CHECK(record["stragglers"][0]["step_rate"].get<double>() <
        0.8 * record["stragglers"][0]["median_step_rate"].get<double>());
  CHECK(record["stragglers"][0]["start"].get<double>() >= record["start_time"].get<double>());
}

TEST_CASE("equal ranks are not flagged while their rates are measured", "[diagnosis][straggler]") {
  // A margin of 0.5: a loaded test machine stalls workers for seconds at times (they catch up in bursts), which
  // the 20 % default would rightly call slow; the unit tests hold equal noisy ranks to the default margin.
  // The workers run for 120 s: long enough for a slow start (a loaded machine may take tens of seconds to start four
  // Pythons) plus the 18 s watched.
  StragglerRun run("none", 120, {"launch.straggler_window=6", "launch.straggler_margin=0.5"});
  // Wait until every rank has a rate (detection is on and judging), then watch three more windows.
  const bool measured = wait_until(
      [&] {
        const nlohmann::json status = run.status();
        if (!status.is_object() || status["ranks"].size() != 4) return false;
        for (const auto& rank : status["ranks"])
          if (!rank["step_rate"].is_number()) return false;
        return true;
      },
      60s);
  INFO("launcher console:\n" << run.console());
  REQUIRE(measured);
  for (int second = 0; second < 18; ++second) {
    const nlohmann::json status = run.status();
    for (int rank = 0; rank < 4; ++rank) CHECK_FALSE(flagged_in_status(status, rank));
    std::this_thread::sleep_for(1s);
  }
  const std::map<std::string, double> straggler = run.metric("mgtrain_rank_straggler");
  CHECK(straggler == std::map<std::string, double>{{"0", 0}, {"1", 0}, {"2", 0}, {"3", 0}});
  CHECK(run.console().find("is a straggler") == std::string::npos);
  CHECK_FALSE(nlohmann::json::parse(read_text(run.run_dir + "/run.json")).contains("stragglers"));
}

TEST_CASE("launch.straggler_detection=false: no rates, no flags", "[diagnosis][straggler]") {
  StragglerRun run("1", 60, {"launch.straggler_window=4", "launch.straggler_detection=false"});
  REQUIRE(wait_until([&] { return run.status().is_object() && run.status()["ranks"].size() == 4; }, 20s));
  std::this_thread::sleep_for(8s);  // longer than it takes to flag with detection on
  const nlohmann::json status = run.status();
  CHECK_FALSE(status["straggler_detection"].get<bool>());
  for (const auto& rank : status["ranks"]) {
    CHECK(rank["step_rate"].is_null());
    CHECK_FALSE(rank["straggler"].get<bool>());
  }
  CHECK(run.metric("mgtrain_rank_straggler").empty());
  CHECK(run.console().find("is a straggler") == std::string::npos);
}
