// Sockets for the rendezvous server and client.
#include "wire/tcp_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace mgtrain {
namespace {

std::string host_of(const sockaddr_storage& storage) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (storage.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text, sizeof text);
  } else if (storage.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      inet_ntop(AF_INET, reinterpret_cast<const char*>(&v6->sin6_addr) + 12, text, sizeof text);
    } else {
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    }
  }
  return text;
}

int port_of(const sockaddr_storage& storage) {
  if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

// A failed socket: closed, with the errno of the failure kept for the caller.
Fd failed(Fd socket) {
  int saved = errno;
  socket.reset();
  errno = saved;
  return Fd();
}

#ifndef TCP_RTO_MAX_MS
#define TCP_RTO_MAX_MS 44  // Linux 6.15 and later; not yet in every libc's headers
#endif

// A rendezvous connection cut for a while must carry heartbeats again soon after the link is back (a blip
// stays a blip, docs/multinode.md). TCP doubles its retransmission timeout up to 120 s, so after a 20 s
// outage the next retransmission could come 20 s after the link returned and the silence would look
// twice as long. Hence linear timeouts for a thin stream's first retransmissions (every kernel), and at
// most 1 s between retransmissions (TCP_RTO_MAX_MS, Linux 6.15+; an older kernel refuses it and keeps
// its backoff). Accepted sockets inherit both from the listener.
void keep_retransmissions_close(int fd) {
  int one = 1, max_rto_ms = 1000;
  setsockopt(fd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &max_rto_ms, sizeof max_rto_ms);
}

// The backlog is the system's maximum (net.core.somaxconn): thousands of agents connect to one server at
// once, and a connection beyond the backlog waits a SYN retransmit (1 s, then 3 s) to be let in.
Fd make_listener(int family, const sockaddr* address, socklen_t length, bool dual_stack) {
  Fd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  int one = 1, zero = 0;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof one);
  keep_retransmissions_close(fd.get());
  if (bind(fd.get(), address, length) != 0 || listen(fd.get(), SOMAXCONN) != 0) return failed(std::move(fd));
  return fd;
}

}  // namespace

std::string SocketAddress::host_text() const { return host_of(storage); }

std::string SocketAddress::text() const {
  std::string host = host_text();
  if (storage.ss_family == AF_INET6 && host.find(':') != std::string::npos)
    return fmt::format("[{}]:{}", host, port_of(storage));
  return fmt::format("{}:{}", host, port_of(storage));
}

std::vector<SocketAddress> resolve_tcp(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int status = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  std::vector<SocketAddress> addresses;
  if (status != 0) {
    error = status == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(status);
    return addresses;
  }
  for (addrinfo* entry = found; entry; entry = entry->ai_next) {
    SocketAddress address;
    std::memcpy(&address.storage, entry->ai_addr, entry->ai_addrlen);
    address.length = entry->ai_addrlen;
    addresses.push_back(address);
  }
  freeaddrinfo(found);
  std::stable_sort(addresses.begin(), addresses.end(), [](const SocketAddress& a, const SocketAddress& b) {
    return a.storage.ss_family == AF_INET && b.storage.ss_family != AF_INET;
  });
  return addresses;
}

Fd listen_on(const SocketAddress& address) {
  return make_listener(address.storage.ss_family, address.get(), address.length, false);
}

Fd listen_on_any(int port) {
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_any;
  v6.sin6_port = htons(static_cast<uint16_t>(port));
  Fd fd = make_listener(AF_INET6, reinterpret_cast<sockaddr*>(&v6), sizeof v6, true);
  if (fd || (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL)) return fd;
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(INADDR_ANY);
  v4.sin_port = htons(static_cast<uint16_t>(port));
  return make_listener(AF_INET, reinterpret_cast<sockaddr*>(&v4), sizeof v4, false);
}

Fd start_connect(const SocketAddress& address) {
  Fd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  keep_retransmissions_close(fd.get());
  if (connect(fd.get(), address.get(), address.length) != 0 && errno != EINPROGRESS) return failed(std::move(fd));
  return fd;
}

int connect_result(int fd) {
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
  return error;
}

std::string peer_host(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return "";
  return host_of(storage);
}

bool is_loopback_host(const std::string& host) {
  const std::string bare =
      host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  return bare == "localhost" || bare.rfind("127.", 0) == 0 || bare == "::1" || bare.rfind("::ffff:127.", 0) == 0;
}

MessageConnection::MessageConnection(Fd fd, const rdzv::RendezvousToken& token, rdzv::ConnectionSide side)
    : fd_(std::move(fd)), auth_(token, side) {
  int one = 1;
  setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  output_ = rdzv::encode(rdzv::hello_message(auth_.nonce(), auth_.enabled()));
  flush();
}

int MessageConnection::take_dropped_frames() {
  int dropped = dropped_;
  dropped_ = 0;
  return dropped;
}

short MessageConnection::poll_events() const { return static_cast<short>(POLLIN | (wants_write() ? POLLOUT : 0)); }

void MessageConnection::close(const std::string& reason) {
  if (!fd_) return;
  fd_.reset();
  end_reason_ = reason;
}

void MessageConnection::send(const rdzv::Message& message) {
  if (!fd_) return;
  if (!auth_.started()) {
    waiting_.push_back(message);
    return;
  }
  queue(message);
  flush();
}

void MessageConnection::queue(const rdzv::Message& message) {
  if (written_ == output_.size()) {
    output_.clear();
    written_ = 0;
  }
  if (auth_.enabled()) {
    output_ += rdzv::encode_tagged(message, [this](const std::string& covered) { return auth_.sign(covered); });
  } else {
    output_ += rdzv::encode(message);
  }
}

void MessageConnection::take_hello(const rdzv::Message& hello) {
  const std::string& mode = hello.text("auth");
  if (mode != rdzv::kAuthHmac && mode != rdzv::kAuthNone)
    throw rdzv::ProtocolError("hello message with an unknown authentication '" + mode.substr(0, 32) + "'");
  const bool peer_tags = mode == rdzv::kAuthHmac;
  if (peer_tags != auth_.enabled()) {
    ++dropped_;  // the hello: nothing after it could be trusted
    close("failed authentication");
    throw AuthenticationError(
        peer_tags ? "the peer authenticates its messages with a rendezvous token, and this node has no token"
                  : "the peer has no rendezvous token, and this node has one: its messages cannot be trusted");
  }
  if (!auth_.start(hello.text("nonce"))) throw rdzv::ProtocolError("hello message with a malformed nonce");
  if (!auth_.enabled()) peer_authenticated_ = true;
  std::vector<rdzv::Message> waiting = std::move(waiting_);
  waiting_.clear();
  for (const rdzv::Message& message : waiting) queue(message);
  flush();
}

void MessageConnection::take_frame(rdzv::Frame& frame, std::vector<rdzv::Message>& messages) {
  const bool hello = frame.message.type == rdzv::MessageType::kHello;
  if (!auth_.started()) {
    if (!hello || !frame.tag.empty()) {
      throw rdzv::ProtocolError("the first message was " + rdzv::type_name(frame.message.type) + ", not hello");
    }
    return take_hello(frame.message);
  }
  if (hello) throw rdzv::ProtocolError("a second hello on one connection");
  if (auth_.enabled() && !auth_.verify(frame.covered, frame.tag)) {
    ++dropped_;
    if (!peer_authenticated_) {  // not one good frame yet: this is not a peer of this job
      close("failed authentication");
      throw AuthenticationError(fmt::format("its {} message failed authentication (a different rendezvous token?)",
                                            rdzv::type_name(frame.message.type)));
    }
    return;  // dropped: a connection that authenticated once keeps going
  }
  if (!auth_.enabled() && !frame.tag.empty()) {  // tagged although both said "none" in their hellos
    ++dropped_;
    return;
  }
  peer_authenticated_ = true;
  messages.push_back(std::move(frame.message));
}

void MessageConnection::flush() {
  while (fd_ && wants_write()) {
    ssize_t count = ::send(fd_.get(), output_.data() + written_, output_.size() - written_, MSG_NOSIGNAL);
    if (count > 0) {
      written_ += static_cast<std::size_t>(count);
      continue;
    }
    if (count < 0 && errno == EINTR) continue;
    if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close(fmt::format("broke the connection ({})", std::strerror(errno)));
  }
}

void MessageConnection::on_ready(short revents, std::vector<rdzv::Message>& messages) {
  if (!fd_) return;
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    char buffer[16384];
    while (fd_) {
      ssize_t count = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (count > 0) {
        received_ += static_cast<std::size_t>(count);
        decoder_.feed(buffer, static_cast<std::size_t>(count));
        try {
          while (fd_) {
            std::optional<rdzv::Frame> frame = decoder_.next_frame();
            if (!frame) break;
            take_frame(*frame, messages);
          }
        } catch (const AuthenticationError&) {
          throw;
        } catch (const rdzv::ProtocolError&) {
          close("sent bytes that are not mgtrain's rendezvous protocol");
          throw;
        }
        // A short read emptied the socket: the poll (level-triggered) reports what comes later, so the
        // read that would only say EAGAIN is saved (a heartbeat costs one read instead of two).
        if (static_cast<std::size_t>(count) < sizeof buffer) break;
        continue;
      }
      if (count == 0) {
        close(auth_.enabled() && !peer_authenticated_
                  ? "closed the connection before any authenticated message (does every node have the same "
                    "rendezvous token?)"
                  : "closed the connection");
      } else if (errno == EINTR) {
        continue;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        close(fmt::format("broke the connection ({})", std::strerror(errno)));
      }
      break;
    }
  }
  if (fd_ && (revents & POLLOUT)) flush();
}

}  // namespace mgtrain
