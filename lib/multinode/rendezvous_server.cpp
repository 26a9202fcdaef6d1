// The rendezvous server's sockets around the round logic.
#include "multinode/rendezvous_server.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

constexpr auto kLinger = std::chrono::seconds(3);
constexpr std::uint64_t kListenerId = 0;  // connection ids start at 1

// How a peer ended its connection before any message of its reached the rounds: "closed the connection in the
// middle of the handshake (5 bytes)". A port scan or a TCP health check closes without sending anything.
std::string early_end(const MessageConnection& socket) {
  const std::string& reason = socket.end_reason();  // "closed the connection ...", "reset the connection (...)"
  const std::string how = starts_with(reason, "closed the connection") ? "closed the connection" : reason;
  if (socket.received_bytes() == 0) return how + " without sending anything";
  if (!socket.peer_hello_arrived())
    return fmt::format("{} in the middle of the handshake ({} bytes)", how, socket.received_bytes());
  return how + " after the handshake, before joining";
}

}  // namespace

RendezvousServer::RendezvousServer(Fd listener, rdzv::RoundsSettings settings, PortProbe& ports,
                                   std::function<void(const std::string&)> note, rdzv::SteadyTime now,
                                   rdzv::RendezvousToken token)
    : token_(std::move(token)),
      listener_(std::move(listener)),
      ports_(ports),
      note_(std::move(note)),
      rounds_(std::move(settings), *this, now) {
  epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw SystemError("creating the rendezvous server's epoll set", errno);
  if (listener_) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kListenerId;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &event) != 0) {
      throw SystemError("watching the rendezvous server's listening socket", errno);
    }
  }
}

void RendezvousServer::send(rdzv::ConnectionId connection, const rdzv::Message& message) {
  auto found = connections_.find(connection);
  if (found == connections_.end()) return;
  Connection& entry = found->second;
  entry.socket->send(message);
  if (entry.socket->wants_write() != entry.watching_output || entry.socket->ended()) changed_.push_back(connection);
}

void RendezvousServer::close(rdzv::ConnectionId connection, bool flush) {
  auto found = connections_.find(connection);
  if (found == connections_.end()) return;
  if (flush) {
    found->second.closing = true;
  } else {
    found->second.socket->close("dropped by the server");  // erased by reap_closed
  }
  changed_.push_back(connection);
}

int RendezvousServer::pick_store_port() { return ports_.pick_free_port(); }

void RendezvousServer::note(const std::string& line) {
  if (note_) note_(line);
}

void RendezvousServer::add_fds(std::vector<pollfd>& fds) { fds.push_back(pollfd{epoll_.get(), POLLIN, 0}); }

void RendezvousServer::watch(rdzv::ConnectionId id, int operation, std::uint32_t events) {
  auto found = connections_.find(id);
  if (found == connections_.end() || found->second.socket->ended()) return;
  epoll_event event{};
  event.events = events;
  event.data.u64 = static_cast<std::uint64_t>(id);
  if (epoll_ctl(epoll_.get(), operation, found->second.socket->fd(), &event) != 0) {
    // ENOMEM/ENOSPC (max_user_watches): a socket the server cannot watch is an agent it cannot serve.
    found->second.socket->close(fmt::format("could not be watched by the server ({})", std::strerror(errno)));
    changed_.push_back(id);
    return;
  }
  found->second.watching_output = (events & EPOLLOUT) != 0;
}

void RendezvousServer::accept_all(rdzv::SteadyTime now) {
  while (listener_) {
    Fd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or a transient error (EMFILE, ECONNABORTED): try again at the next poll
    }
    rdzv::ConnectionId id = next_id_++;
    std::string address = peer_host(fd.get());
    connections_[id].socket = std::make_unique<MessageConnection>(std::move(fd), token_, rdzv::ConnectionSide::kServer);
    connections_[id].address = address;
    watch(id, EPOLL_CTL_ADD, EPOLLIN);
    rounds_.on_connect(id, address, now);
  }
}

void RendezvousServer::on_ready(const pollfd& ready, LoopTime now) {
  if (ready.revents == 0) return;
  // Level-triggered: what is not taken now is reported again. Bounded, so a flood cannot starve the loop.
  constexpr int kBatch = 256;
  epoll_event events[kBatch];
  const std::size_t rounds = connections_.size() / kBatch + 2;
  for (std::size_t round = 0; round < rounds; ++round) {
    int taken = epoll_wait(epoll_.get(), events, kBatch, 0);
    if (taken < 0 && errno == EINTR) continue;
    for (int index = 0; index < taken; ++index) {
      if (events[index].data.u64 == kListenerId) {
        if (listener_) accept_all(now);
        continue;
      }
      short revents = static_cast<short>(
          ((events[index].events & EPOLLIN) ? POLLIN : 0) | ((events[index].events & EPOLLOUT) ? POLLOUT : 0) |
          ((events[index].events & EPOLLHUP) ? POLLHUP : 0) | ((events[index].events & EPOLLERR) ? POLLERR : 0));
      on_connection_ready(static_cast<rdzv::ConnectionId>(events[index].data.u64), revents, now);
    }
    if (taken < kBatch) break;
  }
  reap_closed(now);
}

void RendezvousServer::on_connection_ready(rdzv::ConnectionId id, short revents, rdzv::SteadyTime now) {
  auto found = connections_.find(id);
  if (found == connections_.end() || found->second.socket->ended()) return;  // closed earlier in this batch
  Connection& connection = found->second;
  changed_.push_back(id);
  messages_.clear();
  if (connection.closing) {  // what it still sends does not matter any more
    try {
      connection.socket->on_ready(revents, messages_);
    } catch (const rdzv::ProtocolError&) {}
    return;
  }
  try {
    connection.socket->on_ready(revents, messages_);
    count_dropped(connection, "failed authentication");
  } catch (const AuthenticationError& error) {
    count_dropped(connection, error.what());
    std::vector<rdzv::Message> messages = std::move(messages_);
    for (const rdzv::Message& message : messages) rounds_.on_message(id, message, now);
    rounds_.on_disconnect(id, std::string("failed authentication: ") + error.what(), now);
    return;
  } catch (const rdzv::ProtocolError& error) {
    std::vector<rdzv::Message> messages = std::move(messages_);
    connection.delivered = connection.delivered || !messages.empty();
    if (!connection.delivered) count_dropped_connection(connection, error.what());
    for (const rdzv::Message& message : messages) rounds_.on_message(id, message, now);
    rounds_.on_disconnect(id, std::string("sent bytes that are not mgtrain's rendezvous protocol: ") + error.what(),
                          now);
    return;
  }
  // Moved out: handling a message may send, close or (through rounds) reach this server again.
  std::vector<rdzv::Message> messages = std::move(messages_);
  connection.delivered = connection.delivered || !messages.empty();
  for (const rdzv::Message& message : messages) rounds_.on_message(id, message, now);
  messages_ = std::move(messages);
  auto still = connections_.find(id);
  if (still != connections_.end() && still->second.socket->ended() && !still->second.closing) {
    const Connection& ended = still->second;
    if (!ended.delivered) count_dropped_connection(ended, early_end(*ended.socket));
    rounds_.on_disconnect(id, ended.socket->end_reason(), now);
  }
}

void RendezvousServer::count_dropped_connection(const Connection& connection, const std::string& why) {
  note_drop(dropped_connections_, 1, "connection", connection, why);
}

void RendezvousServer::count_dropped(Connection& connection, const std::string& why) {
  const int dropped = connection.socket->take_dropped_frames();
  if (dropped > 0) note_drop(dropped_frames_, dropped, "message", connection, why);
}

bool RendezvousServer::DropCount::add(long long n) {
  count += n;
  if (count < next_note) return false;
  while (next_note <= count) next_note *= 10;
  return true;
}

void RendezvousServer::note_drop(DropCount& drops, long long n, const char* what, const Connection& connection,
                                 const std::string& why) {
  if (!drops.add(n)) return;
  note(fmt::format("rendezvous: dropped a {} from {} ({}); {} dropped so far, the job is not affected", what,
                   connection.address.empty() ? "an unknown peer" : connection.address, why, drops.count));
}

bool RendezvousServer::abandon(int exit_code, const std::string& text, rdzv::SteadyTime now) {
  bool finished = rounds_.abandon(exit_code, text, now);
  reap_closed(now);
  return finished;
}

void RendezvousServer::reap_closed(rdzv::SteadyTime now) {
  std::vector<rdzv::ConnectionId> changed;
  changed.swap(changed_);
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (rdzv::ConnectionId id : changed) {
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    Connection& connection = it->second;
    if (connection.closing && !connection.shut && !connection.socket->ended() && !connection.socket->has_output()) {
      // Everything sent: a half-close lets the agent read to the end and see EOF; closing outright
      // could reset the connection before it has read the last message.
      shutdown(connection.socket->fd(), SHUT_WR);
      connection.shut = true;
    }
    if (connection.socket->ended()) {
      connections_.erase(it);  // closing the socket took it out of the epoll set
    } else if (connection.socket->wants_write() != connection.watching_output) {
      watch(id, EPOLL_CTL_MOD, EPOLLIN | (connection.socket->wants_write() ? EPOLLOUT : 0u));
    }
  }
  if (!changed_.empty()) return reap_closed(now);  // a socket that could not be watched was closed
  if (rounds_.finished() && !finished_at_) finished_at_ = now;
  // Agents still trying to join hear the refusal or failure for a while (rounds answer them on connect).
  if (rounds_.finished() && (!rounds_.answers_latecomers() || now >= *finished_at_ + kLinger)) listener_.reset();
}

std::optional<rdzv::StacksRefusal> RendezvousServer::start_stacks(double timeout_s, rdzv::SteadyTime now) {
  std::optional<rdzv::StacksRefusal> refused = rounds_.start_stacks(timeout_s, now);
  reap_closed(now);  // the requests were queued on the connections: watch them leave
  return refused;
}

void RendezvousServer::on_time(LoopTime now) {
  rounds_.on_time(now);
  reap_closed(now);
}

std::optional<LoopTime> RendezvousServer::next_deadline() const {
  std::optional<rdzv::SteadyTime> next = rounds_.next_deadline();
  if (finished_at_ && (!connections_.empty() || listener_)) {
    rdzv::SteadyTime linger_end = *finished_at_ + kLinger;
    if (!next || linger_end < *next) next = linger_end;
  }
  return next;
}

void RendezvousServer::stop_lingering() {
  if (!rounds_.finished()) return;
  linger_cut_ = true;
  listener_.reset();
  connections_.clear();
}

bool RendezvousServer::quiescent(rdzv::SteadyTime now) const {
  if (!rounds_.finished()) return false;
  if (linger_cut_) return true;
  if (finished_at_ && now >= *finished_at_ + kLinger) return true;
  return connections_.empty() && !listener_;
}

}  // namespace mgtrain
