// The rendezvous server's sockets around the round logic.
#include "multinode/rendezvous_server.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace mgtrain {
namespace {

constexpr auto kLinger = std::chrono::seconds(3);

}  // namespace

RendezvousServer::RendezvousServer(Fd listener, rdzv::RoundsSettings settings, PortProbe& ports,
                                   std::function<void(const std::string&)> note, rdzv::SteadyTime now)
    : listener_(std::move(listener)), ports_(ports), note_(std::move(note)), rounds_(std::move(settings), *this, now) {}

void RendezvousServer::send(rdzv::ConnectionId connection, const rdzv::Message& message) {
  auto found = connections_.find(connection);
  if (found != connections_.end()) found->second.socket->send(message);
}

void RendezvousServer::close(rdzv::ConnectionId connection, bool flush) {
  auto found = connections_.find(connection);
  if (found == connections_.end()) return;
  if (flush) {
    found->second.closing = true;
  } else {
    found->second.socket->close("dropped by the server");  // erased by reap_closed
  }
}

int RendezvousServer::pick_store_port() { return ports_.pick_free_port(); }

void RendezvousServer::note(const std::string& line) {
  if (note_) note_(line);
}

void RendezvousServer::add_poll_fds(std::vector<pollfd>& fds) {
  polled_.clear();
  if (listener_) fds.push_back(pollfd{listener_.get(), POLLIN, 0});
  for (auto& [id, connection] : connections_) {
    if (connection.socket->ended()) continue;
    fds.push_back(pollfd{connection.socket->fd(), connection.socket->poll_events(), 0});
    polled_.push_back(id);
  }
}

void RendezvousServer::accept_all(rdzv::SteadyTime now) {
  while (true) {
    Fd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or a transient error (EMFILE, ECONNABORTED): try again at the next poll
    }
    rdzv::ConnectionId id = next_id_++;
    std::string address = peer_host(fd.get());
    connections_[id].socket = std::make_unique<MessageConnection>(std::move(fd));
    rounds_.on_connect(id, address, now);
  }
}

void RendezvousServer::on_poll(const pollfd* fds, std::size_t count, rdzv::SteadyTime now) {
  std::size_t index = 0;
  if (listener_) {
    if (count > 0 && fds[0].revents != 0) accept_all(now);
    index = 1;
  }
  for (std::size_t slot = 0; slot < polled_.size() && index < count; ++slot, ++index) {
    if (fds[index].revents == 0) continue;
    auto found = connections_.find(polled_[slot]);
    if (found == connections_.end()) continue;
    Connection& connection = found->second;
    std::vector<rdzv::Message> messages;
    if (connection.closing) {  // what it still sends does not matter any more
      try {
        connection.socket->on_ready(fds[index].revents, messages);
      } catch (const rdzv::ProtocolError&) {
      }
      continue;
    }
    try {
      connection.socket->on_ready(fds[index].revents, messages);
    } catch (const rdzv::ProtocolError& error) {
      for (const rdzv::Message& message : messages) rounds_.on_message(polled_[slot], message, now);
      rounds_.on_disconnect(polled_[slot], std::string("sent bytes that are not mgtrain's rendezvous protocol: ") + error.what(), now);
      continue;
    }
    for (const rdzv::Message& message : messages) rounds_.on_message(polled_[slot], message, now);
    auto still = connections_.find(polled_[slot]);
    if (still != connections_.end() && still->second.socket->ended() && !still->second.closing) {
      rounds_.on_disconnect(polled_[slot], still->second.socket->end_reason(), now);
    }
  }
  reap_closed(now);
}

bool RendezvousServer::abandon(int exit_code, const std::string& text, rdzv::SteadyTime now) {
  bool finished = rounds_.abandon(exit_code, text, now);
  reap_closed(now);
  return finished;
}

void RendezvousServer::reap_closed(rdzv::SteadyTime now) {
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection& connection = it->second;
    if (connection.closing && !connection.shut && !connection.socket->ended() && !connection.socket->has_output()) {
      // Everything sent: a half-close lets the agent read to the end and see EOF; closing outright
      // could reset the connection before it has read the last message.
      shutdown(connection.socket->fd(), SHUT_WR);
      connection.shut = true;
    }
    if (connection.socket->ended()) {
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
  if (rounds_.finished() && !finished_at_) finished_at_ = now;
  // Agents still trying to join hear the refusal or failure for a while (rounds answer them on connect).
  if (rounds_.finished() && (!rounds_.answers_latecomers() || now >= *finished_at_ + kLinger)) listener_.reset();
}

void RendezvousServer::on_time(rdzv::SteadyTime now) {
  rounds_.on_time(now);
  reap_closed(now);
}

std::optional<rdzv::SteadyTime> RendezvousServer::next_deadline() const {
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
