// The agent side of the rendezvous connection.
#include "multinode/rendezvous_client.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "util/time_format.hpp"

namespace mgtrain {
namespace {

constexpr auto kRetryDelay = std::chrono::milliseconds(200);

}  // namespace

RendezvousClient::RendezvousClient(std::string host, int port, rdzv::SteadyTime connect_deadline, rdzv::SteadyTime now,
                                   rdzv::RendezvousToken token)
    : host_(std::move(host)), port_(port), token_(std::move(token)), connect_deadline_(connect_deadline) {
  try_connect(now);
}

std::string RendezvousClient::endpoint() const {
  if (host_.find(':') != std::string::npos) return fmt::format("[{}]:{}", host_, port_);
  return fmt::format("{}:{}", host_, port_);
}

bool RendezvousClient::take_connected_event() {
  bool event = connected_event_;
  connected_event_ = false;
  return event;
}

std::optional<std::string> RendezvousClient::take_unresolved_notice(rdzv::SteadyTime now) {
  if (state_ != State::kConnecting || !notice_due_ || now < *notice_due_) return std::nullopt;
  notice_due_ = now + kUnresolvedNoticeInterval;
  const double left = std::chrono::duration<double>(connect_deadline_ - now).count();
  return fmt::format("still cannot resolve {} ({}); retrying until the join timeout in {}", host_, unresolved_reason_,
                     format_seconds(std::max(0.0, std::ceil(left))));
}

void RendezvousClient::try_connect(rdzv::SteadyTime now) {
  retry_at_.reset();
  std::string error;
  std::vector<SocketAddress> addresses = resolve_tcp(host_, port_, error);
  if (addresses.empty()) {
    problem_ = fmt::format("{} does not resolve ({})", host_, error);
    unresolved_reason_ = error;
    if (!notice_due_) notice_due_ = now + kUnresolvedNoticeInterval;
    retry_at_ = now + kRetryDelay;
    if (now >= connect_deadline_) state_ = State::kUnreachable;
    return;
  }
  notice_due_.reset();
  // The first address; a host with several is tried in turn across retries.
  const SocketAddress& address = addresses[rotation_++ % addresses.size()];
  connecting_to_ = address.text();
  connecting_ = start_connect(address);
  if (!connecting_) connect_failed(errno, now);
}

void RendezvousClient::connect_failed(int error, rdzv::SteadyTime now) {
  connecting_.reset();
  problem_ = fmt::format("{}: {}", connecting_to_, std::strerror(error));
  if (now >= connect_deadline_) {
    state_ = State::kUnreachable;
    return;
  }
  retry_at_ = now + kRetryDelay;
}

void RendezvousClient::add_fds(std::vector<pollfd>& fds) {
  polled_ = 0;
  if (state_ == State::kConnecting && connecting_) {
    fds.push_back(pollfd{connecting_.get(), POLLOUT, 0});
    polled_ = 1;
  } else if (state_ == State::kConnected && connection_ && !connection_->ended()) {
    fds.push_back(pollfd{connection_->fd(), connection_->poll_events(), 0});
    polled_ = 1;
  }
}

void RendezvousClient::on_ready(const pollfd& ready, LoopTime now) {
  if (polled_ == 0 || ready.revents == 0) return;
  if (state_ == State::kConnecting && connecting_) {
    int error = connect_result(connecting_.get());
    if (error != 0) return connect_failed(error, now);
    connection_ = std::make_unique<MessageConnection>(std::move(connecting_), token_, rdzv::ConnectionSide::kAgent);
    state_ = State::kConnected;
    connected_event_ = true;
    last_heard_ = now;
    last_sent_ = now;
    return;
  }
  if (state_ != State::kConnected) return;
  const std::size_t before = messages_.size();
  try {
    connection_->on_ready(ready.revents, messages_);
  } catch (...) {
    messages_.resize(before);  // a call that throws delivers none of what it read
    throw;
  }
  authenticated_ = authenticated_ || connection_->peer_authenticated();
  if (messages_.size() > before) last_heard_ = now;
  if (connection_->ended()) {
    state_ = State::kLost;
    problem_ = connection_->end_reason();
  }
}

void RendezvousClient::on_time(LoopTime now) {
  if (state_ == State::kConnecting && retry_at_ && now >= *retry_at_) try_connect(now);
  if (state_ == State::kConnecting && connecting_ && now >= connect_deadline_) {
    connect_failed(ETIMEDOUT, now);
  }
}

std::optional<LoopTime> RendezvousClient::next_deadline() const {
  if (state_ != State::kConnecting) return std::nullopt;
  if (retry_at_) return *retry_at_;
  return connect_deadline_;
}

void RendezvousClient::send(const rdzv::Message& message) {
  if (state_ != State::kConnected) return;
  send_report(message);
  last_sent_ = rdzv::SteadyTime::clock::now();
}

void RendezvousClient::send_report(const rdzv::Message& message) {
  if (state_ != State::kConnected) return;
  connection_->send(message);
  if (connection_->ended()) {
    state_ = State::kLost;
    problem_ = connection_->end_reason();
  }
}

bool RendezvousClient::unacknowledged() const {
  if (state_ != State::kConnected || !connection_ || connection_->ended()) return false;
  if (connection_->has_output()) return true;
  int queued = 0;  // SIOCOUTQ: bytes not yet acknowledged by the peer
  return ioctl(connection_->fd(), SIOCOUTQ, &queued) == 0 && queued > 0;
}

void RendezvousClient::close() {
  connecting_.reset();
  if (connection_) connection_->close("closed by this agent");
  if (state_ == State::kConnected || state_ == State::kConnecting) state_ = State::kLost;
}

}  // namespace mgtrain
