// Port probing with real sockets (bind to the wildcard address with SO_REUSEADDR, like TCPStore) and the
// reservations among mgtrain launchers (abstract AF_UNIX names).
#include "host/port_probe.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

enum class BindResult { kBound, kInUse, kUnsupported };
enum class Listen { kYes, kNo };

constexpr int kPickAttempts = 64;
// Picks come from the ports just below the kernel's range for outgoing connections' local ports, at most this many.
constexpr int kPickSpan = 12000;
constexpr int kLowestPick = 10000;

// The kernel's range for the local ports of outgoing connections (net.ipv4.ip_local_port_range; Linux's default).
std::pair<int, int> ephemeral_port_range() {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (file >> low >> high && low > 0 && low <= high) return {low, high};
  return {32768, 60999};
}

// Binds the wildcard address of `family` to `port` and, with Listen::kYes, listens; on success returns the bound
// port through `bound_port` (useful for port 0) and, when `keep` is given, the socket through it (else it is closed).
// Without listening, a socket that has SO_REUSEADDR does not stop another job's rank 0 (TCPStore: SO_REUSEADDR too)
// from binding and listening on the same port meanwhile, but the kernel does not choose its port for port 0 again.
BindResult try_bind(int family, int port, int& bound_port, Listen listens = Listen::kYes, Fd* keep = nullptr) {
  Fd fd(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    if (errno == EAFNOSUPPORT) return BindResult::kUnsupported;
    throw SystemError("socket() while checking the master port", errno);
  }
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int result;
  if (family == AF_INET6) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(static_cast<uint16_t>(port));
    result = bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    result = bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  }
  int bind_errno = errno;
  if (result == 0 && listens == Listen::kYes && listen(fd.get(), 1) != 0) {
    result = -1;
    bind_errno = errno;
  }
  if (result == 0) {
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
    bound_port = family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  if (result == 0 && keep) {
    *keep = std::move(fd);
  } else {
    fd.reset();
  }
  if (result == 0) return BindResult::kBound;
  if (bind_errno == EADDRINUSE) return BindResult::kInUse;
  if (bind_errno == EACCES) {
    throw UsageError("launch.master_port " + std::to_string(port) +
                     " may not be used by this user (ports below 1024 need privileges): choose a port above 1023, "
                     "or 0 to pick a free one");
  }
  if (bind_errno == EADDRNOTAVAIL || bind_errno == EAFNOSUPPORT) return BindResult::kUnsupported;
  throw SystemError("bind() to port " + std::to_string(port) + " while checking the master port", bind_errno);
}

}  // namespace

std::optional<PortReservation> PortReservation::take(int port) {
  Fd socket_fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket_fd) throw SystemError("socket(AF_UNIX) for the reservation of port " + std::to_string(port), errno);
  const std::string name = "mgtrain-port-" + std::to_string(port);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());  // sun_path[0] == '\0': the abstract namespace
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(socket_fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    if (errno == EADDRINUSE) return std::nullopt;
    throw SystemError("bind() of the reservation of port " + std::to_string(port) + " (abstract socket @" + name + ")",
                      errno);
  }
  return PortReservation(std::move(socket_fd), port);
}

bool SocketPortProbe::is_free(int port) {
  int bound = 0;
  if (try_bind(AF_INET, port, bound) == BindResult::kInUse) return false;
  return try_bind(AF_INET6, port, bound) != BindResult::kInUse;
}

// A random port below the ephemeral range first: the kernel never gives one of those to an outgoing connection as its
// local port, so between this choice and rank 0's bind only a program that binds it on purpose can take it (a port of
// the kernel's choosing can meanwhile become the local port of another job's connection on this host, and rank 0's
// bind then fails: seen with two SLURM jobs of a cluster on one machine). Then its reservation (skipped when another
// mgtrain launch holds it) and the check at TCP level on both families. Where the range leaves no room below it, or
// every such try fails, the kernel's choice, reserved and checked the same way; the sockets of rejected kernel choices
// stay bound until the end, so the kernel chooses a different port every time.
int SocketPortProbe::pick_free_port() {
  const int high = ephemeral_port_range().first - 1;
  const int low = std::max(kLowestPick, high - kPickSpan);
  if (high - low >= 1024) {
    std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> below_ephemeral(low, high);
    for (int attempt = 0; attempt < kPickAttempts; ++attempt) {
      const int port = below_ephemeral(random);
      if (hold_if_free(port)) return port;
    }
  }
  std::vector<Fd> choices;  // every socket the kernel chose a port for, until the end
  for (int attempt = 0; attempt < kPickAttempts; ++attempt) {
    int port = 0;
    Fd choice;
    if (try_bind(AF_INET, 0, port, Listen::kNo, &choice) != BindResult::kBound) break;
    choices.push_back(std::move(choice));
    if (hold_if_free(port)) return port;
  }
  throw Error("could not find a free TCP port for the master (rendezvous) store in " +
              std::to_string(2 * kPickAttempts) + " tries: set one with --master-port");
}

bool SocketPortProbe::hold_if_free(int port) {
  std::optional<PortReservation> reservation = PortReservation::take(port);
  if (!reservation || !is_free(port)) return false;
  reservation_ = std::move(*reservation);
  return true;
}

PortClaim SocketPortProbe::claim(int port) {
  std::optional<PortReservation> reservation = PortReservation::take(port);
  if (!reservation) return PortClaim::kReservedByMgtrain;
  if (!is_free(port)) return PortClaim::kInUse;
  reservation_ = std::move(*reservation);
  return PortClaim::kTaken;
}

}  // namespace mgtrain
