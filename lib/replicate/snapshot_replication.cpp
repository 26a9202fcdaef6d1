// A node's snapshot replication: the listener, the connections, the sender and the replicas (see
// snapshot_replication.hpp).
#include "replicate/snapshot_replication.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "replicate/snapshot_part.hpp"

namespace mgtrain {
namespace {

constexpr auto kRetry = std::chrono::seconds(2);        // a buddy that could not be reached
constexpr auto kPoll = std::chrono::milliseconds(100);  // how often the stores are looked at for a new snapshot
constexpr std::size_t kMaxPeers = 16;                   // connections kept from senders (the oldest goes first)

// Half of this machine's memory: the largest snapshot it takes from its buddy.
std::uint64_t largest_replica_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::uint64_t{1} << 34;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2;
}

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

std::string endpoint(const std::string& host, int port) {
  return (host.find(':') == std::string::npos ? host : "[" + host + "]") + ":" + std::to_string(port);
}

}  // namespace

SnapshotReplication::SnapshotReplication(const rdzv::RendezvousToken& token, SnapshotStores& stores, bool whole_state,
                                         Say say)
    : token_(token),
      stores_(stores),
      say_(std::move(say)),
      sender_(whole_state),
      replicas_(stores, largest_replica_bytes()) {
  listener_ = listen_on_any(0);
  if (!listener_) {
    say_(
        fmt::format("snapshot replication: cannot listen for the snapshots of another node ({}): this node keeps "
                    "none (docs/checkpoints.md#replicas-on-a-buddy-node)",
                    std::strerror(errno)));
    return;
  }
  port_ = bound_port(listener_.get());
}

void SnapshotReplication::start_round(const rdzv::Assignment& assignment) {
  const int first = assignment.first_rank(assignment.node_rank);
  const int nproc = assignment.nproc_per_node.at(static_cast<std::size_t>(assignment.node_rank));
  std::vector<ReplicaSender::Source> sources;
  sources.reserve(static_cast<std::size_t>(nproc));
  for (int local = 0; local < nproc; ++local) sources.push_back({first + local, stores_.fd_for(local)});
  sender_.set_round(assignment.round, assignment.node_name, sources);
  if (assignment.buddy_host == buddy_host_ && assignment.buddy_port == buddy_port_) {
    buddy_name_ = assignment.buddy_name;
    return;
  }
  buddy_host_ = assignment.buddy_host;
  buddy_port_ = assignment.buddy_port;
  buddy_name_ = assignment.buddy_name;
  buddy_.reset();
  connecting_.reset();
  sender_.restart();
  last_problem_.clear();
  retry_at_.reset();
  if (buddy_port_ > 0) {
    retry_at_ = Clock::now();
    say_(fmt::format("snapshot replication: this node's snapshots in memory go to {} ({})", buddy_name_,
                     endpoint(buddy_host_, buddy_port_)));
  }
}

rdzv::ReplicaStatus SnapshotReplication::status() const {
  rdzv::ReplicaStatus status;
  status.buddy = buddy_port_ > 0 ? buddy_name_ : "";
  status.connected = buddy_ && !buddy_->ended() && buddy_->peer_hello_arrived();
  const ReplicaSender::Counters& sent = sender_.counters();
  status.sent = sent.sent;
  status.skipped = sent.skipped;
  status.bytes_sent = static_cast<long long>(sent.bytes);
  if (sent.newest_step >= 0) {
    status.sent_step = sent.newest_step;
    status.sent_time = static_cast<double>(sent.newest_time_ms) / 1000.0;
  }
  status.received = replicas_.received();
  for (const ReplicaStores::Held& held : replicas_.held()) {
    status.held.push_back({held.rank, held.step, static_cast<double>(held.time_ms) / 1000.0});
  }
  return status;
}

std::string SnapshotReplication::summary() const {
  const ReplicaSender::Counters& sent = sender_.counters();
  if (sent.sent == 0 && sent.skipped == 0 && replicas_.received() == 0) return "";
  return fmt::format(
      "snapshot replication: sent {} snapshot{} ({:.1f} MB; {} skipped), the newest of step {}; received {} "
      "({} damaged on the way), holding {:.1f} MB of replicas",
      sent.sent, sent.sent == 1 ? "" : "s", static_cast<double>(sent.bytes) / 1e6, sent.skipped,
      sent.newest_step >= 0 ? std::to_string(sent.newest_step) : std::string("-"), replicas_.received(),
      replicas_.damaged(), static_cast<double>(replicas_.bytes()) / 1e6);
}

// ---- LoopParticipant -----------------------------------------------------------------------

void SnapshotReplication::add_fds(std::vector<pollfd>& fds) {
  if (listener_) fds.push_back({listener_.get(), POLLIN, 0});
  for (const Peer& peer : peers_) fds.push_back({peer.connection->fd(), peer.connection->poll_events(), 0});
  if (connecting_) fds.push_back({connecting_.get(), POLLOUT, 0});
  if (buddy_ && !buddy_->ended()) fds.push_back({buddy_->fd(), buddy_->poll_events(), 0});
}

void SnapshotReplication::on_ready(const pollfd& ready, Clock::time_point now) {
  if (listener_ && ready.fd == listener_.get()) return accept_peers();
  if ((connecting_ && ready.fd == connecting_.get()) || (buddy_ && ready.fd == buddy_->fd())) {
    return on_buddy_ready(ready, now);
  }
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i].connection->fd() != ready.fd) continue;
    read_peer(peers_[i], ready);
    if (peers_[i].connection->ended()) peers_.erase(peers_.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

std::optional<SnapshotReplication::Clock::time_point> SnapshotReplication::next_deadline() const {
  if (retry_at_ && !buddy_ && !connecting_) return retry_at_;
  if (buddy_ && buddy_->ended()) return Clock::time_point{};  // at once: it is replaced
  if (buddy_ && !buddy_->has_output()) return next_poll_;
  return std::nullopt;
}

void SnapshotReplication::on_time(Clock::time_point now) {
  if (buddy_ && buddy_->ended()) buddy_lost(buddy_->end_reason(), now);
  if (retry_at_ && !buddy_ && !connecting_ && *retry_at_ <= now) connect_buddy(now);
  if (!buddy_ || buddy_->has_output()) return;
  if (!sender_.in_flight() && now < next_poll_) return;
  next_poll_ = now + kPoll;
  pump();
}

// ---- the senders of the node before this one ------------------------------------------------

void SnapshotReplication::accept_peers() {
  for (;;) {
    Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;  // EAGAIN, or an error of that one connection
    if (peers_.size() >= kMaxPeers) peers_.erase(peers_.begin());
    const std::string address = peer_host(fd.get());
    peers_.push_back(
        Peer{std::make_unique<MessageConnection>(std::move(fd), token_, rdzv::ConnectionSide::kServer), address});
  }
}

void SnapshotReplication::read_peer(Peer& peer, const pollfd& ready) {
  std::vector<rdzv::Message> messages;
  std::vector<std::string> notes;
  try {
    peer.connection->on_ready(ready.revents, messages);
    for (const rdzv::Message& message : messages) {
      if (message.type == rdzv::MessageType::kHeartbeat) continue;
      replicas_.take(SnapshotPart::from(message), peer.address, notes);
    }
  } catch (const rdzv::ProtocolError& error) {  // AuthenticationError included: another job, or no token
    notes.push_back(fmt::format("closed the connection from {}: {}", peer.address, error.what()));
    peer.connection->close(error.what());
  }
  for (const std::string& note : notes) say_("snapshot replication: " + note);
}

// ---- the buddy ---------------------------------------------------------------------------------

void SnapshotReplication::connect_buddy(Clock::time_point now) {
  retry_at_.reset();
  std::string error;
  const std::vector<SocketAddress> addresses = resolve_tcp(buddy_host_, buddy_port_, error);
  if (addresses.empty()) return buddy_lost(error, now);
  connecting_ = start_connect(addresses.front());
  if (!connecting_) buddy_lost(std::strerror(errno), now);
}

void SnapshotReplication::on_buddy_ready(const pollfd& ready, Clock::time_point now) {
  if (connecting_) {
    const int result = connect_result(connecting_.get());
    if (result != 0) return buddy_lost(std::strerror(result), now);
    buddy_ = std::make_unique<MessageConnection>(std::move(connecting_), token_, rdzv::ConnectionSide::kAgent);
    connecting_.reset();
    if (!last_problem_.empty()) say_(fmt::format("snapshot replication: reached {} again", buddy_name_));
    last_problem_.clear();
    return;
  }
  std::vector<rdzv::Message> ignored;  // the buddy sends nothing but its hello
  try {
    buddy_->on_ready(ready.revents, ignored);
  } catch (const rdzv::ProtocolError& error) {
    return buddy_lost(error.what(), now);
  }
  if (buddy_->ended()) buddy_lost(buddy_->end_reason(), now);
}

void SnapshotReplication::buddy_lost(std::string why, Clock::time_point now) {
  buddy_.reset();
  connecting_.reset();
  sender_.restart();
  retry_at_ = now + kRetry;
  if (why == last_problem_) return;
  last_problem_ = why;
  say_(fmt::format("snapshot replication: cannot send to {} at {}: {}; trying again every {} s", buddy_name_,
                   endpoint(buddy_host_, buddy_port_), why, kRetry.count()));
}

void SnapshotReplication::pump() {
  while (buddy_ && !buddy_->ended() && !buddy_->has_output()) {
    std::optional<SnapshotPart> part = sender_.next();
    if (!part) return;
    buddy_->send(part->to_message());
  }
}

}  // namespace mgtrain
