// The rendezvous server's sockets, in this process over loopback: connections that end before any message of theirs
// reaches the rounds (bytes that are not this protocol, an oversized frame, a handshake cut short, a port scan's
// connect and close) are counted and noted with the peer's address and what was wrong, at 1, 10, 100, ... as dropped
// frames are; and the client's notice while the server's host name does not resolve, on a fake clock.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/port_probe.hpp"
#include "multinode/rendezvous_client.hpp"
#include "multinode/rendezvous_server.hpp"
#include "wire/rendezvous_message.hpp"
#include "wire/tcp_socket.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct FixedPort : PortProbe {
  int pick_free_port() override { return 29500; }
  bool is_free(int) override { return true; }
};

// A server for two nodes on a loopback port, its notes collected; pump() is the hosting agent's loop.
class LoopbackServer {
 public:
  LoopbackServer() {
    std::string error;
    const std::vector<SocketAddress> addresses = resolve_tcp("127.0.0.1", 0, error);
    REQUIRE(!addresses.empty());
    Fd listener = listen_on(addresses.front());
    REQUIRE(listener);
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    REQUIRE(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &length) == 0);
    port_ = ntohs(bound.sin_port);
    rdzv::RoundsSettings settings;
    settings.min_nodes = settings.max_nodes = 2;
    settings.master_addr = "127.0.0.1";
    settings.host_agent_id = "test:0";
    server_ = std::make_unique<RendezvousServer>(
        std::move(listener), settings, ports_, [this](const std::string& line) { notes_.push_back(line); },
        Clock::now());
  }

  int port() const { return port_; }
  const std::vector<std::string>& notes() const { return notes_; }
  RendezvousServer& server() { return *server_; }

  // Runs the server until `done` holds (false after 5 s).
  bool pump_until(const std::function<bool()>& done) {
    const auto give_up = Clock::now() + 5s;
    while (!done()) {
      if (Clock::now() > give_up) return false;
      std::vector<pollfd> fds;
      server_->add_fds(fds);
      if (poll(fds.data(), fds.size(), 20) > 0) server_->on_ready(fds[0], Clock::now());
      server_->on_time(Clock::now());
    }
    return true;
  }

  // A peer that connects, reads the server's hello (so its close is a FIN, not a reset), sends `bytes` and closes;
  // returns once the server counted it.
  void peer(const std::string& bytes) {
    const long long before = server_->dropped_connections();
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port_));
    REQUIRE(connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    pollfd readable{fd.get(), POLLIN, 0};
    REQUIRE(pump_until([&] { return poll(&readable, 1, 0) > 0; }));
    char buffer[4096];
    REQUIRE(recv(fd.get(), buffer, sizeof buffer, MSG_DONTWAIT) > 0);
    if (!bytes.empty()) REQUIRE(send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()));
    fd.reset();
    REQUIRE(pump_until([&] { return server_->dropped_connections() > before; }));
  }

 private:
  FixedPort ports_;
  int port_ = 0;
  std::vector<std::string> notes_;
  std::unique_ptr<RendezvousServer> server_;
};

std::string hello() { return rdzv::encode(rdzv::hello_message(rdzv::random_hex(16), false)); }

}  // namespace

TEST_CASE("a connection that ends before a message is noted with the peer and what was wrong",
          "[multinode][rendezvous]") {
  std::string oversized = hello();
  for (std::size_t i = 8; i < 12; ++i) oversized[i] = '\xff';  // the payload length
  const std::pair<std::string, std::string> cases[] = {
      {"GET / HTTP/1.0\r\n\r\n",
       "(not an mgtrain rendezvous peer: it sent 47 45 54 20 2f 20 48 54 ('GET / HT') where a message starts with "
       "'MGRV')"},
      {oversized, "(a hello message announces 4294967295 bytes, more than the limit of"},
      {hello().substr(0, 7), "(closed the connection in the middle of the handshake (7 bytes))"},
      {"", "(closed the connection without sending anything)"},
      {hello(), "(closed the connection after the handshake, before joining)"},
  };
  for (const auto& [bytes, why] : cases) {
    INFO(why);
    LoopbackServer server;
    server.peer(bytes);
    REQUIRE(server.notes().size() == 1);
    CHECK_THAT(server.notes()[0], Catch::StartsWith("rendezvous: dropped a connection from 127.0.0.1 " + why));
    CHECK_THAT(server.notes()[0], Catch::EndsWith("; 1 dropped so far, the job is not affected"));
    CHECK(server.server().dropped_connections() == 1);
    CHECK_FALSE(server.server().finished());
  }
}

TEST_CASE("dropped connections are noted at 1, 10, 100, ...: a flood cannot flood the log", "[multinode][rendezvous]") {
  LoopbackServer server;
  for (int i = 0; i < 12; ++i) server.peer("x");
  CHECK(server.server().dropped_connections() == 12);
  REQUIRE(server.notes().size() == 2);
  CHECK_THAT(server.notes()[1], Catch::EndsWith("; 10 dropped so far, the job is not affected"));
}

TEST_CASE("a host that does not resolve is retried, and said so every 30 s until the join timeout",
          "[multinode][rendezvous]") {
  REQUIRE(RendezvousClient::kUnresolvedNoticeInterval == 30s);
  // .invalid never resolves (RFC 6761); the clock is a fake one: only the times passed in count.
  const Clock::time_point start = Clock::now();
  RendezvousClient client("no-such-node.invalid", 29400, start + 600s, start);
  REQUIRE(client.state() == RendezvousClient::State::kConnecting);
  CHECK_FALSE(client.take_unresolved_notice(start));
  client.on_time(start + 29s);
  CHECK_FALSE(client.take_unresolved_notice(start + 29s));
  client.on_time(start + 30s);
  const std::optional<std::string> first = client.take_unresolved_notice(start + 30s);
  REQUIRE(first);
  CHECK_THAT(*first, Catch::StartsWith("still cannot resolve no-such-node.invalid ("));
  CHECK_THAT(*first, Catch::EndsWith("); retrying until the join timeout in 570 s"));
  CHECK_FALSE(client.take_unresolved_notice(start + 31s));  // once per interval
  client.on_time(start + 59s);
  CHECK_FALSE(client.take_unresolved_notice(start + 59s));
  client.on_time(start + 60s);
  const std::optional<std::string> second = client.take_unresolved_notice(start + 60s);
  REQUIRE(second);
  CHECK_THAT(*second, Catch::EndsWith("retrying until the join timeout in 540 s"));
  // At the join timeout the client gives up with the reason; no more notices.
  client.on_time(start + 600s);
  CHECK(client.state() == RendezvousClient::State::kUnreachable);
  CHECK_THAT(client.problem(), Catch::StartsWith("no-such-node.invalid does not resolve ("));
  CHECK_FALSE(client.take_unresolved_notice(start + 630s));
}

TEST_CASE("a host that resolves gets no notice while the server is not up yet", "[multinode][rendezvous]") {
  const Clock::time_point start = Clock::now();
  RendezvousClient client("127.0.0.1", 1, start + 600s, start);  // port 1: refused
  client.on_time(start + 31s);
  CHECK_FALSE(client.take_unresolved_notice(start + 31s));
}
