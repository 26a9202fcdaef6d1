// Frame authentication: tags that verify only on their own connection, in order and in their direction, a token
// mismatch and a peer without a token caught at the first frame, and dropped frames that leave an authenticated
// connection working. Real sockets (a socketpair) carry the frames between two MessageConnections.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "wire/frame_auth.hpp"
#include "wire/rendezvous_message.hpp"
#include "wire/tcp_socket.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;

namespace {

const RendezvousToken kToken{"0123456789abcdef0123456789abcdef", "test"};

struct Pair {
  Fd agent_fd, server_fd;
  Pair() {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    agent_fd = Fd(fds[0]);
    server_fd = Fd(fds[1]);
  }
};

std::vector<Message> pump(MessageConnection& connection) {
  std::vector<Message> messages;
  connection.on_ready(POLLIN | POLLOUT, messages);
  return messages;
}

// The raw bytes waiting on `fd` (what the other side sent).
std::string drain(int fd) {
  std::string bytes;
  char buffer[4096];
  while (true) {
    ssize_t count = recv(fd, buffer, sizeof buffer, 0);
    if (count <= 0) break;
    bytes.append(buffer, static_cast<std::size_t>(count));
  }
  return bytes;
}

}  // namespace

TEST_CASE("two sides with one token exchange authenticated messages both ways", "[rdzv][auth]") {
  Pair pair;
  MessageConnection agent(std::move(pair.agent_fd), kToken, ConnectionSide::kAgent);
  MessageConnection server(std::move(pair.server_fd), kToken, ConnectionSide::kServer);
  agent.send(stop_message(1, "before the hello"));  // waits for the server's nonce
  CHECK(agent.has_output());
  CHECK(pump(server).empty());  // the agent's hello
  CHECK_FALSE(server.peer_authenticated());
  std::vector<Message> at_agent = pump(agent);  // the server's hello: the waiting message leaves
  CHECK(at_agent.empty());
  std::vector<Message> at_server = pump(server);
  REQUIRE(at_server.size() == 1);
  CHECK(at_server[0].text("reason") == "before the hello");
  CHECK(server.peer_authenticated());
  server.send(heartbeat_message());
  server.send(finish_message(0, "done", std::nullopt));
  at_agent = pump(agent);
  REQUIRE(at_agent.size() == 2);
  CHECK(at_agent[1].text("text") == "done");
  CHECK(agent.take_dropped_frames() == 0);
}

TEST_CASE("a tag checks the token, the connection, the order and the direction", "[rdzv][auth]") {
  FrameAuth agent(kToken, ConnectionSide::kAgent), server(kToken, ConnectionSide::kServer);
  REQUIRE(agent.start(server.nonce()));
  REQUIRE(server.start(agent.nonce()));
  const std::string first = encode(heartbeat_message()), second = encode(leave_message(2, "x"));
  const std::string tag1 = agent.sign(first), tag2 = agent.sign(second);
  CHECK_FALSE(server.verify(second, tag2));  // out of order
  CHECK(server.verify(first, tag1));
  CHECK_FALSE(server.verify(first, tag1));  // replayed on the same connection
  CHECK(server.verify(second, tag2));
  // Reflected: the server's own tag does not pass as the agent's.
  const std::string reflected = server.sign(first);
  CHECK_FALSE(server.verify(first, reflected));

  // Another connection of the same two (new nonces): the old tags fail.
  FrameAuth agent2(kToken, ConnectionSide::kAgent), server2(kToken, ConnectionSide::kServer);
  REQUIRE(agent2.start(server2.nonce()));
  REQUIRE(server2.start(agent2.nonce()));
  CHECK_FALSE(server2.verify(first, tag1));
  // Another token.
  FrameAuth other(RendezvousToken{"another token, long enough......", "test"}, ConnectionSide::kAgent);
  FrameAuth server3(kToken, ConnectionSide::kServer);
  REQUIRE(other.start(server3.nonce()));
  REQUIRE(server3.start(other.nonce()));
  CHECK_FALSE(server3.verify(first, other.sign(first)));
  // A damaged frame.
  std::string damaged = first;
  damaged.back() ^= 1;
  FrameAuth a4(kToken, ConnectionSide::kAgent), s4(kToken, ConnectionSide::kServer);
  REQUIRE(a4.start(s4.nonce()));
  REQUIRE(s4.start(a4.nonce()));
  CHECK_FALSE(s4.verify(damaged, a4.sign(first)));
  CHECK_FALSE(s4.start("not hex"));
}

TEST_CASE("different tokens: the first frame fails and the connection is closed", "[rdzv][auth]") {
  Pair pair;
  MessageConnection agent(std::move(pair.agent_fd), RendezvousToken{"the wrong token, long enough....", "test"},
                          ConnectionSide::kAgent);
  MessageConnection server(std::move(pair.server_fd), kToken, ConnectionSide::kServer);
  pump(agent);
  agent.send(heartbeat_message());
  CHECK_THROWS_AS(pump(server), AuthenticationError);
  CHECK(server.ended());
  CHECK(server.take_dropped_frames() == 1);
  std::vector<Message> none;
  agent.on_ready(POLLIN, none);
  CHECK(agent.ended());
  CHECK_THAT(agent.end_reason(), Catch::Contains("same rendezvous token"));
}

TEST_CASE("a token on one side only is refused at the hello, both ways", "[rdzv][auth]") {
  for (bool server_has_token : {true, false}) {
    Pair pair;
    MessageConnection agent(std::move(pair.agent_fd), server_has_token ? RendezvousToken{} : kToken,
                            ConnectionSide::kAgent);
    MessageConnection server(std::move(pair.server_fd), server_has_token ? kToken : RendezvousToken{},
                             ConnectionSide::kServer);
    CHECK_THROWS_AS(pump(server), AuthenticationError);
    CHECK_THROWS_AS(pump(agent), AuthenticationError);
  }
}

TEST_CASE("forged and replayed frames on an authenticated connection are dropped and counted", "[rdzv][auth]") {
  Pair pair;
  const int agent_raw = pair.agent_fd.get();
  MessageConnection server(std::move(pair.server_fd), kToken, ConnectionSide::kServer);
  FrameAuth agent(kToken, ConnectionSide::kAgent);
  std::string server_bytes = drain(agent_raw);  // the server's hello
  MessageDecoder decoder;
  decoder.feed(server_bytes.data(), server_bytes.size());
  std::optional<Frame> hello = decoder.next_frame();
  REQUIRE(hello);
  REQUIRE(agent.start(hello->message.text("nonce")));
  auto sign = [&](const std::string& covered) { return agent.sign(covered); };
  const std::string good = encode_tagged(heartbeat_message(), sign);
  std::string bytes = encode(hello_message(agent.nonce(), true)) + good;
  REQUIRE(send(agent_raw, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  CHECK(pump(server).size() == 1);
  // Replayed, forged with a random tag, untagged: each dropped; the connection lives on.
  std::string forged = encode(leave_message(2, "forged")) + std::string(kTagBytes, 'x');
  forged[6] = static_cast<char>(forged[6] | 0x80);  // the tagged bit: "MGRV", u16 version, the type's high byte
  bytes = good + forged + encode(leave_message(2, "untagged"));
  REQUIRE(send(agent_raw, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  CHECK(pump(server).empty());
  CHECK(server.take_dropped_frames() == 3);
  CHECK_FALSE(server.ended());
  const std::string next = encode_tagged(stop_message(0, "still in order"), sign);
  REQUIRE(send(agent_raw, next.data(), next.size(), 0) == static_cast<ssize_t>(next.size()));
  std::vector<Message> after = pump(server);
  REQUIRE(after.size() == 1);
  CHECK(after[0].text("reason") == "still in order");
}

TEST_CASE("without a token on either side messages flow untagged", "[rdzv][auth]") {
  Pair pair;
  MessageConnection agent(std::move(pair.agent_fd), RendezvousToken{}, ConnectionSide::kAgent);
  MessageConnection server(std::move(pair.server_fd), RendezvousToken{}, ConnectionSide::kServer);
  agent.send(heartbeat_message());
  pump(server);
  pump(agent);
  std::vector<Message> at_server = pump(server);
  CHECK(at_server.size() == 1);
  CHECK(server.peer_authenticated());
}
