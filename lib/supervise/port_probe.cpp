// Port probing with real sockets (bind to the wildcard address with SO_REUSEADDR, like TCPStore).
#include "supervise/port_probe.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>

#include <cstring>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

enum class BindResult { kBound, kInUse, kUnsupported };

// Binds the wildcard address of `family` to `port` and listens; on success returns the bound port
// through `bound_port` (useful for port 0).
BindResult try_bind(int family, int port, int& bound_port) {
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
  if (result == 0 && listen(fd.get(), 1) != 0) {
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
  fd.reset();
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

bool SocketPortProbe::is_free(int port) {
  int bound = 0;
  if (try_bind(AF_INET, port, bound) == BindResult::kInUse) return false;
  return try_bind(AF_INET6, port, bound) != BindResult::kInUse;
}

int SocketPortProbe::pick_free_port() {
  for (int attempt = 0; attempt < 20; ++attempt) {
    int port = 0;
    if (try_bind(AF_INET, 0, port) != BindResult::kBound) break;
    if (is_free(port)) return port;
  }
  throw Error("could not find a free TCP port for the master (rendezvous) store: set one with --master-port");
}

}  // namespace mgtrain
