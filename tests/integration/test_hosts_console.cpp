// `mgtrain launch --hosts` merging its agents' identical rank lines across hosts (hosts/hosts_console.hpp), for real:
// two hosts x two ranks, in network namespaces (netns_hosts.hpp; skipped, saying why, where they cannot be made) and
// on this machine's loopback (runs everywhere). The launcher's merge window is made long
// (MGTRAIN_TEST_HOSTS_DEDUP_WINDOW_MS, hosts_launch.hpp) so that "every host's copy arrived within it" holds on a busy
// machine: a line every rank printed leaves as soon as the last copy came, whatever the timing, and what fewer ranks
// printed leaves at the job's end. The rank logs keep every copy.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "launch_fixture.hpp"
#include "multinode_job.hpp"
#include "netns_agent.hpp"
#include "netns_hosts.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

// Every rank prints the same line on both streams, a line the same on its node only, and one of its own.
const char* kWorker =
    "echo same line\n"
    "echo same line >&2\n"
    "echo \"node $GROUP_RANK\"\n"
    "echo \"rank $RANK differs\"\n";

std::size_t count_of(const std::string& text, const std::string& wanted) {
  std::size_t count = 0;
  for (std::size_t at = text.find(wanted); at != std::string::npos; at = text.find(wanted, at + 1)) ++count;
  return count;
}

// The launcher's argv for two hosts x two ranks running `worker`, with `more` flags before the command.
std::vector<std::string> two_by_two(const std::string& host0, const std::string& host1, const std::string& remote_shell,
                                    const std::string& master_addr, const std::string& master_port, const TempDir& dir,
                                    const std::string& worker, const std::vector<std::string>& more = {}) {
  std::vector<std::string> argv = {kMgtrain,         "launch",     "--hosts",        host0 + ":2," + host1 + ":2",
                                   "--remote-shell", remote_shell, "--master-addr",  master_addr,
                                   "--master-port",  master_port,  "--run-id",       "mn",
                                   "--log-dir",      dir / "runs", "--grace-period", "1",
                                   "--join-timeout", "20"};
  argv.insert(argv.end(), more.begin(), more.end());
  argv.push_back("--");
  argv.push_back(worker);
  return argv;
}

// Runs the job to its end (exit 0 required); the launcher's stdout and stderr.
std::pair<std::string, std::string> run_job(const std::vector<std::string>& argv, const TempDir& dir,
                                            const std::string& window_ms) {
  std::vector<std::pair<std::string, std::string>> environment;
  if (!window_ms.empty()) environment.emplace_back("MGTRAIN_TEST_HOSTS_DEDUP_WINDOW_MS", window_ms);
  ChildProcess launcher = start_process(argv, dir / "launcher", environment);
  const std::optional<int> code = wait_for_exit(launcher.pid, 60s);
  const std::string out = read_text(launcher.out_path);
  const std::string err = read_text(launcher.err_path);
  INFO("launcher stdout:\n" << out << "launcher stderr:\n" << err);
  REQUIRE(code == 0);
  return {out, err};
}

// What a merged 2 x 2 job shows: one line for the line every rank printed, per stream; the node lines behind their
// host; each rank's own line behind its host and rank; and every copy in the rank logs.
void check_merged(const std::string& out, const std::string& err, const std::string& host0, const std::string& host1,
                  const TempDir& dir) {
  INFO("launcher stdout:\n" << out << "launcher stderr:\n" << err);
  CHECK(count_of(out, "same line") == 1);
  CHECK(count_of(out, "[ranks 0-3] same line\n") == 1);
  CHECK(count_of(err, "same line") == 1);
  CHECK(count_of(err, "[ranks 0-3] same line\n") == 1);
  // A line of one host keeps it (its agent merged its two ranks, or this launcher did: the same host either way).
  CHECK(count_of(out, "[" + host0 + "] [ranks 0-1] node 0\n") == 1);
  CHECK(count_of(out, "[" + host1 + "] [ranks 2-3] node 1\n") == 1);
  // Lines that differ are never merged.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string host = rank < 2 ? host0 : host1;
    CHECK(count_of(out, "[" + host + "] [rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                            " differs\n") == 1);
  }
  CHECK(count_of(out, "differs") == 4);
  // The rank logs hold every copy.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string log = rank_log(dir, rank / 2, 0, rank);
    CHECK(read_text(log) ==
          "same line\nnode " + std::to_string(rank / 2) + "\nrank " + std::to_string(rank) + " differs\n");
    CHECK(read_text(log.substr(0, log.size() - std::string("stdout.log").size()) + "stderr.log") == "same line\n");
  }
}

}  // namespace

TEST_CASE("hosts console: a line every rank of two hosts printed shows once as [ranks 0-3] (namespaces)",
          "[multinode][hosts][console]") {
  NetnsHosts hosts(2);
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  const std::string worker = write_script(dir / "w.sh", kWorker);
  const auto [out, err] = run_job(
      two_by_two(hosts.name(0), hosts.name(1), "ip netns exec {host} sh -c", hosts.address(0), "29500", dir, worker),
      dir, "60000");
  check_merged(out, err, hosts.name(0), hosts.name(1), dir);
}

TEST_CASE("hosts console: a line every rank of two hosts printed shows once as [ranks 0-3] (loopback)",
          "[hosts][console]") {
  TempDir dir;
  const std::string worker = write_script(dir / "w.sh", kWorker);
  const std::string port = std::to_string(free_port());
  const auto [out, err] = run_job(
      two_by_two("127.0.0.1", "localhost", "env MGTRAIN_TEST_HOST={host} sh -c", "127.0.0.1", port, dir, worker), dir,
      "60000");
  check_merged(out, err, "127.0.0.1", "localhost", dir);
}

TEST_CASE("hosts console: --no-console-dedup shows every rank's copy behind its host, on the agents too",
          "[hosts][console]") {
  TempDir dir;
  const std::string worker = write_script(dir / "w.sh", kWorker);
  const std::string port = std::to_string(free_port());
  const auto [out, err] = run_job(two_by_two("127.0.0.1", "localhost", "env MGTRAIN_TEST_HOST={host} sh -c",
                                             "127.0.0.1", port, dir, worker, {"--no-console-dedup"}),
                                  dir, "60000");
  INFO("launcher stdout:\n" << out << "launcher stderr:\n" << err);
  CHECK(count_of(out, "[ranks") == 0);
  CHECK(count_of(err, "[ranks") == 0);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string prefix =
        std::string(rank < 2 ? "[127.0.0.1]" : "[localhost]") + " [rank " + std::to_string(rank) + "] ";
    CHECK(count_of(out, prefix + "same line\n") == 1);
    CHECK(count_of(err, prefix + "same line\n") == 1);
    CHECK(count_of(out, prefix + "node " + std::to_string(rank / 2) + "\n") == 1);
  }
}
