// Nobody outside a running multi-node job can end it (issue 22, items 1 and 2), with real launchers on loopback:
// a late joiner with another config is refused alone while the job finishes with 0; with a token, garbage,
// forged frames and frames recorded from a real agent and replayed on new connections are dropped and the job
// finishes with 0; nodes whose tokens differ, or where only one has a token, are told so and exit 2.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "host/port_probe.hpp"
#include "integration/launch_fixture.hpp"
#include "util/fd.hpp"
#include "wire/frame_auth.hpp"
#include "wire/rendezvous_message.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

const std::string kMgtrain = std::string(MGTRAIN_BIN_DIR) + "/mgtrain";
const std::string kToken = "3f1c0d7e9a8b6c5d4e3f2a1b0c9d8e7f";

// Node `rank` of a static two-node job (one worker each, run id "auth") meeting at 127.0.0.1:`port`.
std::vector<std::string> node(int rank, int port, const TempDir& dir, const std::string& program,
                              const std::vector<std::string>& more = {}) {
  std::vector<std::string> argv = {kMgtrain,         "launch",
                                   "--nnodes",       "2",
                                   "--node-rank",    std::to_string(rank),
                                   "--master-addr",  "127.0.0.1",
                                   "--master-port",  std::to_string(port),
                                   "--nproc",        "1",
                                   "--run-id",       "auth",
                                   "--log-dir",      dir / "runs",
                                   "--grace-period", "2"};
  argv.insert(argv.end(), more.begin(), more.end());
  if (std::find(more.begin(), more.end(), "--join-timeout") == more.end())
    argv.insert(argv.end(), {"--join-timeout", "20"});
  argv.push_back("--");
  argv.push_back(program);
  return argv;
}

// A connection to the loopback `port`, retried for a few seconds (the server may still be starting); invalid if
// it never answers.
Fd connect_to(int port) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
    std::this_thread::sleep_for(50ms);
  }
  return Fd();
}

void send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t count = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (count <= 0) return;  // the server hung up on us: fine
    sent += static_cast<std::size_t>(count);
  }
}

// Sends `bytes` on a new connection and reads what comes back for a moment.
void attack(int port, const std::string& bytes) {
  Fd fd = connect_to(port);
  REQUIRE(fd);
  send_all(fd.get(), bytes);
  pollfd ready{fd.get(), POLLIN, 0};
  char buffer[4096];
  for (int i = 0; i < 5 && poll(&ready, 1, 40) >= 0; ++i) {
    if ((ready.revents & POLLIN) && recv(fd.get(), buffer, sizeof buffer, MSG_DONTWAIT) <= 0) break;
  }
}

// A TCP relay from a loopback port to `target` that records what the agent sends (to replay it later).
class RecordingRelay {
 public:
  explicit RecordingRelay(int target) : target_(target) {
    listener_ = Fd(listening_socket(port_));
    thread_ = std::thread([this] { run(); });
  }
  ~RecordingRelay() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return port_; }
  std::string recorded() {
    std::lock_guard<std::mutex> lock(mutex_);
    return recorded_;
  }

 private:
  void run() {
    pollfd accept_poll{listener_.get(), POLLIN, 0};
    while (!stop_ && poll(&accept_poll, 1, 50) == 0) {}
    if (stop_) return;
    Fd agent(accept(listener_.get(), nullptr, nullptr));
    Fd server = connect_to(target_);
    if (!server) return;
    char buffer[16384];
    while (!stop_) {
      pollfd fds[2] = {{agent.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (poll(fds, 2, 50) <= 0) continue;
      for (int side = 0; side < 2; ++side) {
        if (!(fds[side].revents & (POLLIN | POLLHUP))) continue;
        ssize_t count = recv(fds[side].fd, buffer, sizeof buffer, 0);
        if (count <= 0) {
          shutdown(fds[1 - side].fd, SHUT_WR);
          return;
        }
        if (side == 0) {
          std::lock_guard<std::mutex> lock(mutex_);
          recorded_.append(buffer, static_cast<std::size_t>(count));
        }
        send_all(fds[1 - side].fd, std::string(buffer, static_cast<std::size_t>(count)));
      }
    }
  }

  int target_;
  int port_ = 0;
  Fd listener_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::string recorded_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("a late joiner with another config is refused alone and the running job finishes with 0",
          "[faults][rendezvous][joiners]") {
  TempDir dir;
  const std::string worker = write_script(dir / "work.sh", "sleep 4");
  const int port = free_port();
  ChildProcess node0 = start_process(node(0, port, dir, worker), dir / "node0");
  ChildProcess node1 = start_process(node(1, port, dir, worker), dir / "node1");
  REQUIRE(wait_until([&] { return read_text(node1.err_path).find("round 0:") != std::string::npos; }, 15s));
  ChildProcess joiner = start_process(node(1, port, dir, worker, {"--set", "optim.lr=0.5"}), dir / "joiner");
  CHECK(wait_for_exit(joiner.pid, 15s) == 2);
  CHECK(wait_for_exit(node0.pid, 20s) == 0);
  CHECK(wait_for_exit(node1.pid, 20s) == 0);
  CHECK_THAT(read_text(joiner.err_path), Catch::Contains("optim.lr: 0.5 vs 0.01"));
  const std::string log = read_text(node0.err_path);
  CHECK_THAT(log, Catch::Contains("rendezvous: refused") && Catch::Contains("optim.lr: 0.5 vs 0.01") &&
                      Catch::Contains("the job goes on without it"));
}

TEST_CASE("with a token, garbage, forged and replayed frames are dropped and the job finishes with 0",
          "[faults][rendezvous][auth]") {
  TempDir dir;
  const std::string worker = write_script(dir / "work.sh", "sleep 5");
  const int port = free_port();
  const std::vector<std::pair<std::string, std::string>> token_env = {{"MGTRAIN_RDZV_TOKEN", kToken}};
  ChildProcess node0 = start_process(node(0, port, dir, worker), dir / "node0", token_env);
  RecordingRelay relay(port);
  ChildProcess node1 = start_process(node(1, relay.port(), dir, worker), dir / "node1", token_env);
  REQUIRE(wait_until([&] { return read_text(node1.err_path).find("round 0:") != std::string::npos; }, 15s));
  std::mt19937 random(22);
  auto random_bytes = [&](std::size_t size) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(random() & 0xff);
    return bytes;
  };
  // What node 1's agent sent (its hello, its authenticated join, heartbeats), replayed on new connections.
  const std::string recorded = relay.recorded();
  REQUIRE(recorded.size() > 100);
  for (int i = 0; i < 5; ++i) attack(port, recorded);
  // Pure garbage, and well-formed frames with a hello and random tags (a forged join for node 1 among them).
  for (int i = 0; i < 10; ++i) attack(port, random_bytes(1 + random() % 300));
  rdzv::JoinRequest forged;
  forged.version = "any";
  forged.node_rank = 1;
  forged.hostname = "intruder";
  forged.agent_id = "intruder:1";
  forged.nnodes = "2";
  forged.run_id = "auth";
  for (int i = 0; i < 10; ++i) {
    const std::string hello = rdzv::encode(rdzv::hello_message(rdzv::random_hex(16), true));
    const std::string tag = random_bytes(rdzv::kTagBytes);
    std::string frames = hello + rdzv::encode_tagged(forged.to_message(), [&](const std::string&) { return tag; });
    frames += rdzv::encode_tagged(rdzv::leave_message(9, "forged"), [&](const std::string&) { return tag; });
    attack(port, frames);
  }
  // An untagged join from a peer that claims to have no token.
  attack(port, rdzv::encode(rdzv::hello_message(rdzv::random_hex(16), false)) + rdzv::encode(forged.to_message()));
  CHECK(wait_for_exit(node0.pid, 25s) == 0);
  CHECK(wait_for_exit(node1.pid, 25s) == 0);
  const std::string log = read_text(node0.err_path);
  CHECK_THAT(log, Catch::Contains("authenticated with the token from MGTRAIN_RDZV_TOKEN"));
  CHECK_THAT(log, Catch::Contains("dropped a message from 127.0.0.1") && Catch::Contains("the job is not affected"));
  CHECK_THAT(log, !Catch::Contains("intruder"));
}

TEST_CASE("without a token, garbage and cut handshakes on the rendezvous port are logged by node 0, rate-limited",
          "[faults][rendezvous]") {
  TempDir dir;
  const int port = free_port();
  ChildProcess node0 = start_process(node(0, port, dir, "true", {"--join-timeout", "30"}), dir / "node0");
  attack(port, "GET / HTTP/1.0\r\n\r\n");
  const std::string dropped = "rendezvous: dropped a connection from 127.0.0.1";
  CHECK(wait_until([&] { return read_text(node0.err_path).find(dropped) != std::string::npos; }, 15s));
  // Nine more (a hello cut short, a port scan's connect and close, ...): the tenth is noted again, the others not.
  const std::string hello = rdzv::encode(rdzv::hello_message(rdzv::random_hex(16), false));
  for (int i = 0; i < 9; ++i) attack(port, i % 2 ? hello.substr(0, 7) : std::string());
  CHECK(wait_until([&] { return read_text(node0.err_path).find("10 dropped so far") != std::string::npos; }, 15s));
  ::kill(node0.pid, SIGTERM);
  CHECK(wait_for_exit(node0.pid, 15s).has_value());
  const std::string log = read_text(node0.err_path);
  CHECK_THAT(log, Catch::Contains(dropped + " (not an mgtrain rendezvous peer: it sent 47 45 54 20 2f 20 48 54 "
                                            "('GET / HT') where a message starts with 'MGRV'); 1 dropped so far, the "
                                            "job is not affected"));
  std::size_t lines = 0;
  for (std::size_t at = log.find(dropped); at != std::string::npos; at = log.find(dropped, at + 1)) ++lines;
  CHECK(lines == 2);
}

TEST_CASE("nodes with different tokens, or a token on one node only, are told so and exit 2",
          "[faults][rendezvous][auth]") {
  for (const std::string& other_token : {std::string("a different token of enough length"), std::string()}) {
    TempDir dir;
    const int port = free_port();
    std::vector<std::pair<std::string, std::string>> node1_env;
    if (!other_token.empty()) node1_env.push_back({"MGTRAIN_RDZV_TOKEN", other_token});
    ChildProcess node0 = start_process(node(0, port, dir, "true", {"--join-timeout", "4"}), dir / "node0",
                                       {{"MGTRAIN_RDZV_TOKEN", kToken}});
    ChildProcess node1 = start_process(node(1, port, dir, "true", {"--join-timeout", "4"}), dir / "node1", node1_env);
    CHECK(wait_for_exit(node1.pid, 15s) == 2);
    CHECK_THAT(read_text(node1.err_path), Catch::Contains("same token"));
    CHECK(wait_for_exit(node0.pid, 15s).has_value());  // the join timeout: node 1 never joined
    CHECK_THAT(read_text(node0.err_path), Catch::Contains("dropped a message from 127.0.0.1"));
  }
}

TEST_CASE("a token that is too short or a token file others can read is refused before anything starts",
          "[faults][rendezvous][auth]") {
  TempDir dir;
  const int port = free_port();
  CaptureOptions short_env;
  short_env.set_env["MGTRAIN_RDZV_TOKEN"] = "abc";
  CapturedRun short_token = run_and_capture(node(0, port, dir, "true"), short_env);
  CHECK(short_token.exit_code == 2);
  CHECK_THAT(short_token.err, Catch::Contains("MGTRAIN_RDZV_TOKEN has 3 characters; at least 16"));
  const std::string file = dir / "token";
  write_script(file, kToken);  // mode 755: readable by others
  CapturedRun readable = run_and_capture(node(0, port, dir, "true", {"--rdzv-token-file", file}));
  CHECK(readable.exit_code == 2);
  CHECK_THAT(readable.err, Catch::Contains("chmod 600"));
}
