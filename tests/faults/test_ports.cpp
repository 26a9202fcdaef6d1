// No port races (issue 22, item 3), through the real `mgtrain` binary: many concurrent single-node launches whose
// rank 0 binds MASTER_PORT as torch's TCPStore does never get a port another launch took (on this host's ports, and
// crowded into 100 ports in a network namespace of their own, where only the reservations keep them apart); an
// "address already in use" at rank 0's store start on a port the launcher picked (a script saying torch's words, and
// torch 2.x's own TCPStore when its venv is there) restarts the group on a new port without counting a restart; a
// port the user gave is not retried; a port another running mgtrain launch reserved is refused.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>

#include <chrono>
#include <string>
#include <vector>

#include "integration/launch_fixture.hpp"
#include "process/run_capture.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// Rank 0 binds 0.0.0.0:MASTER_PORT with SO_REUSEADDR and listens, as TCPStore does, holds it 0.3-1 s and exits 0
// ("Address already in use" and exit 1 when the port is taken); the other ranks exit 0 at once.
std::string write_store_worker(const TempDir& dir) {
  return write_script(dir / "store_worker.sh",
                      "[ \"$RANK\" = 0 ] || exit 0\n"
                      "exec python3 -S -c '\n"
                      "import os, random, socket, time\n"
                      "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
                      "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                      "s.bind((\"0.0.0.0\", int(os.environ[\"MASTER_PORT\"])))\n"
                      "s.listen(64)\n"
                      "time.sleep(random.uniform(0.3, 1.0))\n"
                      "'\n");
}

// Rank 0's first try fails as TCPStore does when its port is taken (torch 2.x's libuv message); the marker file
// remembers the try and its port. Every try writes its restart count and port to seen_<rank>.
std::string write_clashing_worker(const TempDir& dir) {
  const std::string marker = dir / "clashed";
  return write_script(dir / "clash_worker.sh",
                      "if [ \"$RANK\" = 0 ] && [ ! -e \"" + marker +
                          "\" ]; then\n"
                          "  echo \"$MASTER_PORT\" > \"" +
                          marker +
                          "\"\n"
                          "  echo \"torch.distributed.DistNetworkError: The server socket has failed to listen on any "
                          "local network address. port: $MASTER_PORT, useIpv6: false, code: -98, name: EADDRINUSE, "
                          "message: address already in use\" >&2\n"
                          "  exit 1\n"
                          "fi\n"
                          "echo \"$TORCHELASTIC_RESTART_COUNT $MASTER_PORT\" > \"$MGTRAIN_RUN_DIR/seen_$RANK\"\n");
}

int count_of(const std::string& text, const std::string& part) {
  int count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// Rounds of `kLaunches` concurrent launches of `worker`, each started as prefix + mgtrain launch ...; counts the
// launches that failed and the port retries their consoles announced.
struct RoundsOutcome {
  int failures = 0;
  int port_retries = 0;
  std::string failed_output;  // the end of the first failed launches' consoles
  double seconds = 0;
};

RoundsOutcome run_rounds(const TempDir& dir, const std::string& worker, int rounds,
                         const std::vector<std::string>& prefix = {}) {
  constexpr int kLaunches = 30;
  RoundsOutcome outcome;
  const auto started = std::chrono::steady_clock::now();
  for (int round = 0; round < rounds; ++round) {
    std::vector<ChildProcess> launches;
    for (int index = 0; index < kLaunches; ++index) {
      const std::string id = "r" + std::to_string(round) + "_" + std::to_string(index);
      std::vector<std::string> argv = prefix;
      argv.insert(argv.end(),
                  {kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", id, "--nproc", "2", "--", worker});
      launches.push_back(start_process(argv, dir / id));
    }
    for (const ChildProcess& launch : launches) {
      const std::optional<int> code = wait_for_exit(launch.pid, 60s);
      if (!code) {
        kill(launch.pid, SIGKILL);
        wait_for_exit(launch.pid, 5s);
      }
      const std::string err = read_text(launch.err_path);
      outcome.port_retries += count_of(err, "not counted as a restart");
      if (code != 0) {
        ++outcome.failures;
        if (outcome.failed_output.size() < 4000) {
          outcome.failed_output += err.substr(err.size() > 1500 ? err.size() - 1500 : 0);
        }
      }
    }
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return outcome;
}

// A network namespace of its own (loopback only) whose ephemeral port range is 100 ports: the kernel's port choices
// crowd together, so launches that do not reserve their port collide in nearly every round. Abstract socket names,
// like ports, belong to the namespace. Needs root (ip netns); skip_reason() says why it could not be made.
class CrowdedNamespace {
 public:
  CrowdedNamespace() : name_("mgtrain-ports-" + std::to_string(getpid())) {
    for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (access(path, X_OK) == 0) ip_ = path;
    }
    if (ip_.empty() || geteuid() != 0) {
      skip_reason_ = "needs root and the ip command (ip netns)";
      return;
    }
    if (run_and_capture({ip_, "netns", "add", name_}).exit_code != 0) {
      skip_reason_ = "ip netns add failed";
      return;
    }
    created_ = true;
    const bool ready = run_and_capture({ip_, "-n", name_, "link", "set", "lo", "up"}).exit_code == 0 &&
                       run_and_capture({ip_, "netns", "exec", name_, "sh", "-c",
                                        "echo '41000 41099' > /proc/sys/net/ipv4/ip_local_port_range"})
                               .exit_code == 0;
    if (!ready) skip_reason_ = "cannot set up the namespace's loopback and port range";
  }
  ~CrowdedNamespace() {
    if (created_) run_and_capture({ip_, "netns", "delete", name_});
  }
  CrowdedNamespace(const CrowdedNamespace&) = delete;
  CrowdedNamespace& operator=(const CrowdedNamespace&) = delete;
  const std::string& skip_reason() const { return skip_reason_; }
  std::vector<std::string> exec_prefix() const { return {ip_, "netns", "exec", name_}; }

 private:
  std::string name_;
  std::string ip_;
  std::string skip_reason_;
  bool created_ = false;
};

}  // namespace

TEST_CASE("30 concurrent launches x 8 rounds whose rank 0 binds MASTER_PORT: no launch fails", "[faults][ports]") {
  TempDir dir;
  const RoundsOutcome outcome = run_rounds(dir, write_store_worker(dir), 8);
  WARN(outcome.failures << " of 240 launches failed, " << outcome.port_retries << " port retries, in "
                        << outcome.seconds << " s");
  INFO(outcome.failed_output);
  CHECK(outcome.failures == 0);
}

TEST_CASE("30 concurrent launches x 4 rounds in 100 ports: reservations alone keep them apart", "[faults][ports]") {
  CrowdedNamespace crowded;
  if (!crowded.skip_reason().empty()) {
    WARN("skipped: " << crowded.skip_reason());
    return;
  }
  TempDir dir;
  const RoundsOutcome outcome = run_rounds(dir, write_store_worker(dir), 4, crowded.exec_prefix());
  WARN(outcome.failures << " of 120 launches failed, " << outcome.port_retries << " port retries, in "
                        << outcome.seconds << " s");
  INFO(outcome.failed_output);
  CHECK(outcome.failures == 0);
  CHECK(outcome.port_retries == 0);  // nothing but mgtrain in this namespace: no launch ever met another's port
}

TEST_CASE("rank 0 finding its picked store port taken: the group restarts on a new port, not counted",
          "[faults][ports]") {
  TempDir dir;
  const std::string worker = write_clashing_worker(dir);
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--run-id", "clash", "--max-restarts", "0", "--", worker});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  const std::string first_port = trim(read_text(dir / "clashed"));
  REQUIRE_FALSE(first_port.empty());
  CHECK(count_of(run.err, "not counted as a restart") == 1);
  CHECK_THAT(run.err, Catch::Contains("port " + first_port) && Catch::Contains("already in use"));
  for (const char* rank : {"0", "1"}) {
    const std::vector<std::string> seen = split(trim(read_text(dir / "runs/clash/seen_" + std::string(rank))), ' ');
    REQUIRE(seen.size() == 2);
    CHECK(seen[0] == "0");         // TORCHELASTIC_RESTART_COUNT: the port retry is not a restart
    CHECK(seen[1] != first_port);  // on a new port
  }
  CHECK(file_exists(dir / "runs/clash/attempt_0/rank_0/stderr.log"));  // the clashed try's logs are kept
  CHECK_FALSE(file_exists(dir / "runs/clash/failure.json"));
}

TEST_CASE("torch's own TCPStore finding its port taken by another program: retried on a new port", "[faults][ports]") {
  const std::string python = std::string(MGTRAIN_TORCH2_VENV) + "/bin/python";  // scripts/torch2-env.sh's venv
  if (access(python.c_str(), X_OK) != 0) {
    WARN("skipped: no torch 2.x venv at " << MGTRAIN_TORCH2_VENV);
    return;
  }
  TempDir dir;
  const std::string marker = dir / "clashed";
  // On its first try rank 0 itself listens on MASTER_PORT before torch does: as a foreign program would.
  write_script(dir / "store.py",
               "import datetime, os, socket\n"
               "port, rank = int(os.environ['MASTER_PORT']), int(os.environ['RANK'])\n"
               "if rank == 0 and not os.path.exists('" +
                   marker +
                   "'):\n"
                   "    open('" +
                   marker +
                   "', 'w').write(str(port))\n"
                   "    foreign = socket.socket()\n"
                   "    foreign.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                   "    foreign.bind(('0.0.0.0', port))\n"
                   "    foreign.listen()\n"
                   "import torch.distributed as dist\n"
                   "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=60))\n"
                   // Before either rank leaves: a rank that exits as soon as its side of Gloo's mesh is up can close
                   // the connection the other rank is still completing ("Connection closed by peer").
                   "dist.barrier()\n"
                   "print('restart count', os.environ['TORCHELASTIC_RESTART_COUNT'], 'port', port, 'world', "
                   "dist.get_world_size())\n"
                   "dist.destroy_process_group()\n");
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--run-id", "torch", "--", python, dir / "store.py"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  const std::string first_port = trim(read_text(marker));
  CHECK_THAT(run.err, Catch::Contains("EADDRINUSE") && Catch::Contains("port " + first_port + " was already in use"));
  CHECK(count_of(run.err, "not counted as a restart") == 1);
  CHECK(count_of(run.out, "restart count 0 port ") == 2);
  CHECK(count_of(run.out, "port " + first_port + " world") == 0);
}

TEST_CASE("a store port the user gave is the user's: rank 0 finding it taken fails the job, no retry",
          "[faults][ports]") {
  TempDir dir;
  const std::string worker = write_clashing_worker(dir);
  int port = 0;
  close(listening_socket(port));
  CapturedRun run = mgtrain_launch(dir, {"--nproc", "2", "--run-id", "given", "--master-port", std::to_string(port),
                                         "--max-restarts", "0", "--", worker});
  INFO(run.err);
  CHECK(run.exit_code == 1);
  CHECK(count_of(run.err, "not counted as a restart") == 0);
  CHECK_THAT(run.err, Catch::Contains("port " + std::to_string(port)) && Catch::Contains("--master-port"));
  CHECK_FALSE(file_exists(dir / "runs/given/attempt_1"));
}

TEST_CASE("a port another running mgtrain launch reserved is refused as --master-port", "[faults][ports]") {
  TempDir dir;
  const std::string port_file = dir / "port";
  const std::string release = dir / "release";
  // The first job's worker does not bind its store port: the port is free at TCP level, only reserved.
  const std::string holder =
      write_script(dir / "holder.sh", "echo \"$MASTER_PORT\" > \"" + port_file + ".tmp\"; mv \"" + port_file +
                                          ".tmp\" \"" + port_file + "\"\nfor i in $(seq 200); do [ -e \"" + release +
                                          "\" ] && exit 0; sleep 0.05; done\nexit 0\n");
  ChildProcess first =
      start_process({kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", "first", "--nproc", "1", "--", holder},
                    dir / "first");
  REQUIRE(wait_until([&] { return file_exists(port_file); }, 20s));
  const std::string port = trim(read_text(port_file));
  CapturedRun second = mgtrain_launch(dir, {"--nproc", "1", "--run-id", "second", "--master-port", port, "--", "true"});
  write_script(release, "");
  CHECK(wait_for_exit(first.pid, 20s) == 0);
  INFO(second.err);
  CHECK(second.exit_code == 2);
  CHECK_THAT(second.err, Catch::Contains("master_port " + port) && Catch::Contains("another mgtrain launch"));
  CHECK_FALSE(file_exists(dir / "runs/second/attempt_0"));
}
