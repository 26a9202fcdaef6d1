// The launcher's status API against a live run of the real `mgtrain` binary whose workers are shell
// scripts (heartbeat lines, rank 0's metrics.jsonl, SIGUSR2 = "save now", SIGUSR1 = save and exit 75),
// over real HTTP on loopback: /healthz, the /status schema, /metrics line by line against the Prometheus
// rules, /api/metrics, the page, the bearer token (401 and nothing happens), loopback-only binding, a busy
// port refused before any worker starts, POST /checkpoint and POST /stop (exit 75), and `mgtrain status`.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "launch_fixture.hpp"
#include "process/run_capture.hpp"
#include "support/prometheus_text.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct HttpReply {
  int status = 0;  // 0: no connection
  std::string headers;
  std::string body;
};

// A plain HTTP/1.1 request over a socket of our own (not the server's library), "Connection: close".
HttpReply http(const std::string& address, int port, const std::string& method, const std::string& path,
               const std::string& extra_headers = "", bool content_length = true) {
  HttpReply reply;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return reply;
  }
  const std::string request = method + " " + path + " HTTP/1.1\r\nHost: " + address + "\r\nConnection: close\r\n" +
                              extra_headers + (method == "POST" && content_length ? "Content-Length: 0\r\n" : "") +
                              "\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string text;
  char buffer[65536];
  ssize_t got;
  while ((got = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
  close(fd);
  const std::size_t header_end = text.find("\r\n\r\n");
  if (text.rfind("HTTP/1.1 ", 0) != 0 || header_end == std::string::npos) return reply;
  reply.status = std::atoi(text.c_str() + 9);
  reply.headers = text.substr(0, header_end);
  reply.body = text.substr(header_end + 4);
  return reply;
}

int free_port() {
  int port = 0;
  int fd = listening_socket(port);
  close(fd);
  return port;
}

// Workers: beat with step and loss every 50 ms; rank 0 appends metrics rows; SIGUSR2 writes a "checkpoint"
// file and goes on, SIGUSR1 writes one and exits 75 (as mgtrain-worker does with checkpoints on).
std::string status_worker(const TempDir& dir) {
  return write_script(dir / "worker.sh", R"SH(
step=0
save() { mkdir -p "$MGTRAIN_RUN_DIR/checkpoints"; echo "$step" > "$MGTRAIN_RUN_DIR/checkpoints/rank${RANK}_step$step"; }
trap 'save' USR2
trap 'save; exit 75' USR1
while true; do
  step=$((step + 1))
  printf '{"step":%d,"loss":%d.25,"time":%s}\n' "$step" $((100 - step % 90)) "$(date +%s)" > "$MGTRAIN_HEARTBEAT_FILE.tmp"
  mv -f "$MGTRAIN_HEARTBEAT_FILE.tmp" "$MGTRAIN_HEARTBEAT_FILE"
  if [ "$RANK" = 0 ]; then
    printf '{"kind":"train","step":%d,"epoch":0,"time":%s,"loss":%d.5}\n' "$step" "$(date +%s)" $((100 - step % 90)) >> "$MGTRAIN_RUN_DIR/metrics.jsonl"
  fi
  sleep 0.05
done
)SH");
}

struct LiveRun {
  TempDir dir;
  int port = 0;
  ChildProcess launcher;
  std::string run_dir;

  explicit LiveRun(const std::vector<std::string>& extra_flags = {}) {
    port = free_port();
    std::vector<std::string> argv = {
        kMgtrain,    "launch",     "--nproc",  "2",    "--status-port",  std::to_string(port),
        "--log-dir", dir / "runs", "--run-id", "live", "--grace-period", "3"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    argv.push_back("--");
    argv.push_back(status_worker(dir));
    run_dir = dir / "runs/live";
    launcher = start_process(argv, dir / "launcher");
    const bool up = wait_until(
        [&] {
          return http("127.0.0.1", port, "GET", "/healthz").status == 200 &&
                 read_text(run_dir + "/attempt_0/rank_1/heartbeat").find("step") != std::string::npos &&
                 read_text(run_dir + "/attempt_0/rank_0/heartbeat").find("step") != std::string::npos;
        },
        20s);
    if (!up) {
      kill(launcher.pid, SIGKILL);
      wait_for_exit(launcher.pid, 5s);
      FAIL("the run did not come up; launcher stderr: " << read_text(launcher.err_path));
    }
  }
  ~LiveRun() {
    if (kill(launcher.pid, 0) == 0) {
      kill(launcher.pid, SIGTERM);
      if (!wait_for_exit(launcher.pid, 10s)) {
        kill(launcher.pid, SIGKILL);
        wait_for_exit(launcher.pid, 5s);
      }
    }
  }
  std::string token() const {
    std::string text = read_text(run_dir + "/status_token");
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }
  std::size_t checkpoints() const {
    std::error_code error;
    if (!fs::is_directory(run_dir + "/checkpoints", error)) return 0;
    return static_cast<std::size_t>(
        std::distance(fs::directory_iterator(run_dir + "/checkpoints"), fs::directory_iterator()));
  }
};

// This machine's first IPv4 address that is not loopback ("" when it has none).
std::string non_loopback_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(list);
  return found;
}

// The local addresses (hex as in /proc/net/tcp) of listening TCP sockets on `port`.
std::vector<std::string> listening_addresses(int port) {
  std::vector<std::string> found;
  std::istringstream lines(read_text("/proc/net/tcp"));
  std::string line;
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, "%04X", port);
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > 5 && local.substr(local.size() - 4) == port_hex)
      found.push_back(local.substr(0, 8));
  }
  return found;
}

}  // namespace

TEST_CASE("status API: /healthz, the /status schema, the page and the curves of a live run", "[status_api]") {
  LiveRun run;
  CHECK(http("127.0.0.1", run.port, "GET", "/healthz").body == "ok\n");
  CHECK(read_text(run.run_dir + "/status_endpoint") == "127.0.0.1:" + std::to_string(run.port) + "\n");

  // Steps advance between two reads of /status.
  HttpReply first = http("127.0.0.1", run.port, "GET", "/status");
  REQUIRE(first.status == 200);
  CHECK_THAT(first.headers, Catch::Contains("application/json"));
  YAML::Node s = YAML::Load(first.body);
  CHECK(s["run_id"].as<std::string>() == "live");
  CHECK(s["run_dir"].as<std::string>() == run.run_dir);
  CHECK(s["attempt"].as<int>() == 0);
  CHECK(s["restarts"].as<int>() == 0);
  CHECK(s["phase"].as<std::string>() == "running");
  CHECK(s["gpus"].IsSequence());
  REQUIRE(s["ranks"].size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    YAML::Node r = s["ranks"][rank];
    CHECK(r["rank"].as<int>() == rank);
    CHECK(r["local_rank"].as<int>() == rank);
    CHECK(r["state"].as<std::string>() == "running");
    const pid_t pid = r["pid"].as<int>();
    CHECK(kill(pid, 0) == 0);  // the worker's real pid
    CHECK(r["step"].as<long long>() >= 1);
    CHECK(r["loss"].as<double>() > 0);
    CHECK(std::abs(r["last_heartbeat"].as<double>() - s["time"].as<double>()) < 10);
    CHECK(r["cpu_percent"].IsDefined());
    CHECK(r["rss_bytes"].IsDefined());
  }
  const long long step_before = s["ranks"][0]["step"].as<long long>();
  REQUIRE(wait_until(
      [&] {
        return YAML::Load(http("127.0.0.1", run.port, "GET", "/status").body)["ranks"][0]["step"].as<long long>() >
               step_before;
      },
      10s));
  // CPU% and RSS come from the sampler within a few seconds (two /proc readings).
  CHECK(wait_until(
      [&] {
        YAML::Node r = YAML::Load(http("127.0.0.1", run.port, "GET", "/status").body)["ranks"][0];
        return !r["cpu_percent"].IsNull() && r["rss_bytes"].as<long long>() > 0;
      },
      10s));

  YAML::Node curves = YAML::Load(http("127.0.0.1", run.port, "GET", "/api/metrics").body);
  CHECK(curves["train"].size() >= 1);
  CHECK(curves["eval"].size() == 0);

  HttpReply page = http("127.0.0.1", run.port, "GET", "/");
  CHECK(page.status == 200);
  CHECK_THAT(page.headers, Catch::Contains("text/html"));
  CHECK_THAT(page.body, Catch::Contains("<svg"));
  // Self-contained: nothing loaded from elsewhere.
  CHECK_THAT(page.body, !Catch::Contains("http://") && !Catch::Contains("https://") && !Catch::Contains("src="));
  CHECK(http("127.0.0.1", run.port, "GET", "/nothing").status == 404);
}

TEST_CASE("status API: /metrics is valid Prometheus text with the ranks' figures", "[status_api][prometheus]") {
  LiveRun run;
  HttpReply reply = http("127.0.0.1", run.port, "GET", "/metrics");
  REQUIRE(reply.status == 200);
  CHECK_THAT(reply.headers, Catch::Contains("text/plain; version=0.0.4"));
  std::vector<PrometheusSample> samples;
  const std::vector<std::string> problems = prometheus_text_problems(reply.body, &samples);
  INFO(reply.body);
  for (const std::string& problem : problems) FAIL_CHECK(problem);
  int up = 0, steps = 0;
  for (const PrometheusSample& sample : samples) {
    if (sample.name == "mgtrain_rank_up" && sample.value == 1 && sample.labels.at("run_id") == "live") ++up;
    if (sample.name == "mgtrain_rank_step" && sample.value >= 1) ++steps;
  }
  CHECK(up == 2);
  CHECK(steps == 2);
}

TEST_CASE("status API: POST without the right token is 401 and saves nothing, with it a checkpoint appears",
          "[status_api][token]") {
  LiveRun run;
  const std::string token = run.token();
  REQUIRE(token.size() == 64);
  struct stat info {};
  REQUIRE(stat((run.run_dir + "/status_token").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);

  CHECK(http("127.0.0.1", run.port, "POST", "/checkpoint").status == 401);
  CHECK(http("127.0.0.1", run.port, "POST", "/checkpoint", "Authorization: Bearer " + std::string(64, '0') + "\r\n")
            .status == 401);
  CHECK(http("127.0.0.1", run.port, "POST", "/checkpoint", "Authorization: Bearer " + token.substr(0, 63) + "\r\n")
            .status == 401);
  CHECK(http("127.0.0.1", run.port, "POST", "/checkpoint", "Authorization: Basic " + token + "\r\n").status == 401);
  CHECK(http("127.0.0.1", run.port, "POST", "/stop", "Authorization: Bearer nope\r\n").status == 401);
  std::this_thread::sleep_for(500ms);  // a wrongly accepted command would have reached the workers by now
  CHECK(run.checkpoints() == 0);
  CHECK(kill(run.launcher.pid, 0) == 0);

  // As `curl -X POST` sends it: no Content-Length, no body.
  HttpReply accepted =
      http("127.0.0.1", run.port, "POST", "/checkpoint", "Authorization: Bearer " + token + "\r\n", false);
  CHECK(accepted.status == 202);
  CHECK(wait_until([&] { return run.checkpoints() == 2; }, 10s));  // one per rank, and the run goes on
  std::this_thread::sleep_for(200ms);
  CHECK(kill(run.launcher.pid, 0) == 0);
  CHECK(YAML::Load(http("127.0.0.1", run.port, "GET", "/status").body)["phase"].as<std::string>() == "running");
}

TEST_CASE("status API: POST /stop saves and stops the workers, the launcher exits 75", "[status_api][stop]") {
  LiveRun run;
  HttpReply accepted = http("127.0.0.1", run.port, "POST", "/stop", "Authorization: Bearer " + run.token() + "\r\n");
  CHECK(accepted.status == 202);
  std::optional<int> code = wait_for_exit(run.launcher.pid, 20s);
  REQUIRE(code);
  CHECK(*code == 75);
  CHECK(run.checkpoints() == 2);
  CHECK_THAT(read_text(run.launcher.err_path), Catch::Contains("saved a checkpoint and stopped on request"));
  // The server is gone with the launcher.
  CHECK(http("127.0.0.1", run.port, "GET", "/healthz").status == 0);
}

TEST_CASE("status API: bound to loopback by default", "[status_api][bind]") {
  LiveRun run;
  const std::vector<std::string> addresses = listening_addresses(run.port);
  REQUIRE(addresses.size() == 1);
  CHECK(addresses[0] == "0100007F");  // 127.0.0.1 in /proc/net/tcp's byte order
  const std::string outside = non_loopback_address();
  if (outside.empty()) {
    WARN("no non-loopback IPv4 address on this machine: the connect-from-outside half is not checked");
  } else {
    CHECK(http(outside, run.port, "GET", "/healthz").status == 0);
  }
}

TEST_CASE("status API: a busy port is refused with its number before any worker starts", "[status_api][bind]") {
  TempDir dir;
  int port = 0;
  int busy = listening_socket(port);
  mgtrain::CapturedRun result = mgtrain::run_and_capture(
      {kMgtrain, "launch", "--status-port", std::to_string(port), "--log-dir", dir / "runs", "--run-id", "busy", "--",
       write_script(dir / "worker.sh", "touch \"$MGTRAIN_RUN_DIR/started\"")});
  close(busy);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Catch::Contains("127.0.0.1:" + std::to_string(port)) && Catch::Contains("--status-port"));
  CHECK_FALSE(file_exists(dir / "runs/busy/started"));
  CHECK_FALSE(file_exists(dir / "runs/busy/attempt_0"));
}

TEST_CASE("mgtrain status: the live table, and the files when no launcher serves", "[status_api][cli]") {
  std::string run_dir, log_dir;
  TempDir keep;
  {
    LiveRun run;
    log_dir = run.dir / "runs";
    mgtrain::CapturedRun live = mgtrain::run_and_capture({kMgtrain, "status", "--log-dir", log_dir});
    CHECK(live.exit_code == 0);
    CHECK_THAT(live.out, Catch::Contains("run live: running") && Catch::Contains("rank") && Catch::Contains("running"));
    const std::vector<std::string> lines = mgtrain::split_lines(live.out);
    int rank_rows = 0;
    for (const std::string& line : lines) rank_rows += line.rfind("0     0 ", 0) == 0 || line.rfind("1     1 ", 0) == 0;
    CHECK(rank_rows == 2);
    mgtrain::CapturedRun json = mgtrain::run_and_capture({kMgtrain, "status", "live", "--log-dir", log_dir, "--json"});
    CHECK(json.exit_code == 0);
    CHECK(YAML::Load(json.out)["ranks"].size() == 2);
    // Stop it, then ask again: the launcher is gone, run.json says how it ended, the files remain; no connection is
    // tried (no httplib word such as "Connection"), and no raw JSON rows are shown.
    kill(run.launcher.pid, SIGTERM);
    REQUIRE(wait_for_exit(run.launcher.pid, 10s));
    mgtrain::CapturedRun dead = mgtrain::run_and_capture({kMgtrain, "status", "--log-dir", log_dir});
    INFO(dead.out << dead.err);
    CHECK(dead.exit_code == 0);
    CHECK_THAT(dead.out, Catch::Contains("run live has ended: stopped, exit code 143") &&
                             Catch::Contains("last heartbeats") && Catch::Contains("rank_0") &&
                             Catch::Contains("metrics    step ") && Catch::Contains("directory  " + log_dir + "/live"));
    CHECK_THAT(dead.out + dead.err, !Catch::Contains("Connection") && !Catch::Contains("no answer") &&
                                        !Catch::Contains("{") && !Catch::Contains("no live status server"));
    mgtrain::CapturedRun missing = mgtrain::run_and_capture({kMgtrain, "status", "nope", "--log-dir", log_dir});
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.err, Catch::Contains("no run 'nope'"));
  }
}

TEST_CASE("mgtrain status: a finished run gets a readable summary of run.json, no connection attempt",
          "[status_api][cli]") {
  TempDir dir;
  const std::string log_dir = dir / "runs";
  // The status API was on, so status_endpoint names a port nobody listens on any more.
  mgtrain::CapturedRun launched =
      mgtrain::run_and_capture({kMgtrain, "launch", "--status-port", std::to_string(mgtrain::testing::free_port()),
                                "--log-dir", log_dir, "--run-id", "done", "--", "sh", "-c", "exit 0"});
  INFO(launched.out << launched.err);
  REQUIRE(launched.exit_code == 0);
  REQUIRE(file_exists(log_dir + "/done/status_endpoint"));
  mgtrain::CapturedRun status = mgtrain::run_and_capture({kMgtrain, "status", "done", "--log-dir", log_dir});
  INFO(status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::StartsWith("run done has ended: succeeded, exit code 0\n"));
  for (const char* row : {"  started    ", "  ended      ", "  attempts   1\n", "  nodes      1 (", "  directory  "}) {
    CHECK_THAT(status.out, Catch::Contains(row));
  }
  CHECK_THAT(status.out + status.err, !Catch::Contains("Connection") && !Catch::Contains("no answer") &&
                                          !Catch::Contains("{") && !Catch::Contains("\"status\""));
  // --json has no /status to print for an ended run: exit 1, said plainly on stderr.
  mgtrain::CapturedRun json = mgtrain::run_and_capture({kMgtrain, "status", "done", "--log-dir", log_dir, "--json"});
  CHECK(json.exit_code == 1);
  CHECK(json.out.empty());
  CHECK_THAT(json.err, Catch::Contains("has ended (succeeded)") && !Catch::Contains("Connection"));
}
