// Issue 22 item 5, through the real `mgtrain` binary: IPv6 addresses in brackets work wherever an address is taken
// (a single-node job whose worker binds MASTER_ADDR, a dynamic rendezvous at [::1]:0, a two-node static job meeting at
// [::1]), and bad input ends with the documented usage exit code and a message naming it, at once, never "internal
// error" (a flag given a non-boolean value, a FIFO, /dev/zero and nested brackets as config). Cases that need an IPv6
// loopback print SKIP and pass on a machine without one.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "integration/launch_fixture.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

namespace {

// A free port on [::1] (the kernel's choice, released again), or 0 when the machine has no IPv6 loopback.
int free_ipv6_loopback_port() {
  Fd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return 0;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return 0;
  socklen_t length = sizeof address;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  return ntohs(address.sin6_port);
}

bool have_ipv6_loopback() {
  if (free_ipv6_loopback_port() != 0) return true;
  WARN("SKIP: this machine has no IPv6 loopback (binding [::1] failed)");
  return false;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

CapturedRun run_mgtrain(std::vector<std::string> args, double timeout_s = 20) {
  args.insert(args.begin(), kMgtrain);
  CaptureOptions options;
  options.timeout_s = timeout_s;
  return run_and_capture(args, options);
}

}  // namespace

TEST_CASE("a job with --master-addr in IPv6 brackets: the worker gets ::1 and binds it", "[faults][input]") {
  if (!have_ipv6_loopback()) return;
  TempDir dir("mgtrain-input");
  // The worker binds MASTER_ADDR:MASTER_PORT as rank 0's store would (a bracketed MASTER_ADDR fails in getaddrinfo).
  const std::string worker = write_script(dir / "bind.sh", R"(echo "addr=$MASTER_ADDR"
exec python3 -c 'import os, socket
s = socket.create_server((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), family=socket.AF_INET6)
print("bound", s.getsockname()[0])'
)");
  const CapturedRun run = mgtrain_launch(
      dir, {"--master-addr", "[::1]", "--local-addr=[::1]", "--status-bind", "[::1]", "--nproc", "1", "--", worker});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(contains(run.out, "[rank 0] addr=::1\n"));
  CHECK(contains(run.out, "[rank 0] bound ::1\n"));
}

TEST_CASE("a dynamic rendezvous at the IPv6 loopback in brackets, port 0, on one node", "[faults][input]") {
  if (!have_ipv6_loopback()) return;
  TempDir dir("mgtrain-input");
  const CapturedRun run = mgtrain_launch(dir, {"--rdzv-endpoint", "[::1]:0", "--rdzv-backend", "c10d", "--nnodes", "1",
                                               "--nproc", "2", "--", "sh", "-c", "echo \"addr=$MASTER_ADDR\""});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(contains(run.out, "[rank 0] addr=::1\n"));
  CHECK(contains(run.out, "[rank 1] addr=::1\n"));
}

TEST_CASE("two nodes meet at a bracketed IPv6 --master-addr and --rdzv-endpoint", "[faults][input]") {
  if (!have_ipv6_loopback()) return;
  for (const bool endpoint : {false, true}) {
    DYNAMIC_SECTION((endpoint ? "--rdzv-endpoint" : "--master-addr")) {
      TempDir dir("mgtrain-input");
      const int port = free_ipv6_loopback_port();
      std::vector<ChildProcess> nodes;
      for (int rank = 0; rank < 2; ++rank) {
        std::vector<std::string> argv = {
            kMgtrain,         "launch", "--log-dir",   dir / "runs",         "--run-id", "v6",
            "--nnodes",       "2",      "--node-rank", std::to_string(rank), "--nproc",  "1",
            "--join-timeout", "20"};
        if (endpoint) {
          argv.insert(argv.end(), {"--rdzv-backend", "static", "--rdzv-endpoint", "[::1]:" + std::to_string(port)});
        } else {
          argv.insert(argv.end(), {"--master-addr", "[::1]", "--master-port", std::to_string(port)});
        }
        argv.insert(argv.end(), {"--", "sh", "-c", "echo \"rank=$RANK addr=$MASTER_ADDR\""});
        nodes.push_back(start_process(argv, dir / ("node" + std::to_string(rank))));
      }
      for (int rank = 0; rank < 2; ++rank) {
        const std::optional<int> code = wait_for_exit(nodes[rank].pid, std::chrono::seconds(40));
        const std::string out = read_text(nodes[rank].out_path);
        INFO("node " << rank << ": " << out << read_text(nodes[rank].err_path));
        CHECK(code == std::optional<int>(0));
        CHECK(contains(out, "rank=" + std::to_string(rank) + " addr=::1\n"));
      }
    }
  }
}

TEST_CASE("bad input through the binary: documented usage exit code and a message naming it", "[faults][input]") {
  TempDir dir("mgtrain-input");
  CapturedRun run = run_mgtrain({"launch", "--standalone=x", "--nproc", "1", "--", "true"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "launch: --standalone is a flag: give it alone, or as --standalone=true"));
  run = run_mgtrain({"launch", "--exit-with-stdin=abc", "--nproc", "1", "--", "true"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "launch: --exit-with-stdin is a flag"));

  const std::string fifo = dir / "fifo.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    INFO(path);
    const auto start = std::chrono::steady_clock::now();
    run = run_mgtrain({"config", "validate", path});
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    CHECK_FALSE(run.timed_out);
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err, path + ": is a "));
  }
  std::ofstream(dir / "deep.yaml") << std::string(10000, '[');
  run = run_mgtrain({"config", "validate", dir / "deep.yaml"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "deep.yaml:1:65: nesting deeper than 64 levels"));
  std::ofstream(dir / "two.yaml") << "train:\n  epochs: 1\n---\nbogus: 1\n";
  run = run_mgtrain({"config", "validate", dir / "two.yaml"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "two.yaml:3:1: a second YAML document starts here"));
  CHECK_FALSE(contains(run.err + run.out, "internal error"));
}

TEST_CASE("a malformed host is refused at once with exit 2, and a config value's NUL is shown escaped",
          "[faults][input]") {
  TempDir dir("mgtrain-input");
  // `config validate` refuses what `launch` would retry until the join timeout (600 s by default).
  std::ofstream(dir / "plus.yaml") << "launch:\n  rdzv_endpoint: '+1'\n";
  CapturedRun run = run_mgtrain({"config", "validate", dir / "plus.yaml"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err,
                 "plus.yaml:2:18: launch.rdzv_endpoint: '+1' has a malformed host: '+' is not allowed in a "
                 "host name (letters, digits, '-', '_' and '.')"));
  std::ofstream(dir / "ok.yaml") << "train:\n  epochs: 1\n";
  run = run_mgtrain({"config", "validate", dir / "ok.yaml", "--set", "launch.master_addr=node-"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "launch.master_addr: 'node-' is not a valid host: 'node-': a part of a host name"));
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--rdzv-endpoint", "+1"}, std::vector<std::string>{"--rdzv-endpoint", "+1:29400"},
        std::vector<std::string>{"--master-addr", "+1", "--node-rank", "1"}}) {
    INFO(flags[0] << " " << flags[1]);
    std::vector<std::string> args = {"launch", "--nnodes", "2", "--nproc", "1", "--log-dir", dir / "runs"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "true"});
    const auto start = std::chrono::steady_clock::now();
    run = run_mgtrain(args, 20);
    CHECK_FALSE(run.timed_out);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err, "'+' is not allowed in a host name"));
  }
  // A NUL inside a quoted YAML value used to end the message there ("launch.rdzv_endpoint: 'a").
  std::ofstream(dir / "nul.yaml") << "launch:\n  rdzv_endpoint: \"a\\0b\"\n";
  run = run_mgtrain({"config", "validate", dir / "nul.yaml"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err,
                 "launch.rdzv_endpoint: 'a\\0b' has a malformed host: byte 0x00 is not allowed in a host "
                 "name (letters, digits, '-', '_' and '.') (allowed: empty, or HOST[:PORT])"));
  // argv cannot carry a NUL, but other control characters, shown escaped too.
  run = run_mgtrain({"launch", "--nnodes", "2", "--nproc", "1", "--rdzv-endpoint",
                     "a\x01"
                     "b\x1b[2J",
                     "--", "true"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "launch.rdzv_endpoint: 'a\\x01b\\x1b[2J' has a malformed host: byte 0x01"));
}
