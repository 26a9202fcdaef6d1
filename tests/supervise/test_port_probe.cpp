// Port probing with real sockets: the reservations among mgtrain launchers (abstract AF_UNIX names), picking a
// port another launch reserved is impossible, claiming one is refused, and reservations end with their owner.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host/port_probe.hpp"
#include "util/fd.hpp"

using namespace mgtrain;

namespace {

// A socket listening on a kernel-chosen port of the wildcard address, as a foreign program's server would.
Fd foreign_listener(int& port) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(listen(fd.get(), 1) == 0);
  socklen_t length = sizeof address;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
  return fd;
}

}  // namespace

TEST_CASE("a port is reserved once: the second reservation fails until the first ends", "[port]") {
  SocketPortProbe probe;
  const int port = probe.pick_free_port();  // a port nobody uses, reserved by `probe`; released below
  probe = SocketPortProbe();
  std::optional<PortReservation> first = PortReservation::take(port);
  REQUIRE(first);
  CHECK(first->held());
  CHECK(first->port() == port);
  CHECK_FALSE(PortReservation::take(port));
  SECTION("released on destruction") {
    first.reset();
    CHECK(PortReservation::take(port));
  }
  SECTION("moved, it is still held once") {
    PortReservation moved = std::move(*first);
    first.reset();
    CHECK(moved.held());
    CHECK_FALSE(PortReservation::take(port));
  }
  SECTION("another port is not affected") { CHECK(PortReservation::take(port == 65535 ? port - 1 : port + 1)); }
}

TEST_CASE("the reservation's socket is not inherited by the workers (close-on-exec)", "[port]") {
  SocketPortProbe probe;
  const int port = probe.pick_free_port();
  const std::string name = std::string(1, '\0') + "mgtrain-port-" + std::to_string(port);
  int found = 0;
  for (int fd = 3; fd < 1024; ++fd) {
    sockaddr_un address{};
    socklen_t length = sizeof address;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 || address.sun_family != AF_UNIX) continue;
    if (std::string(address.sun_path, length - offsetof(sockaddr_un, sun_path)) != name) continue;
    ++found;
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  }
  CHECK(found == 1);
}

TEST_CASE("a picked port is reserved by its probe until the probe picks again or ends", "[port]") {
  std::optional<SocketPortProbe> launcher(std::in_place);
  SocketPortProbe other;
  const int picked = launcher->pick_free_port();
  CHECK(launcher->reserved_port() == picked);
  CHECK(other.claim(picked) == PortClaim::kReservedByMgtrain);
  CHECK(other.is_free(picked));  // free at TCP level all the while: only the reservation keeps it

  SECTION("a new pick moves the reservation (a restart on a new port)") {
    const int next = launcher->pick_free_port();
    CHECK(next != picked);
    CHECK(other.claim(next) == PortClaim::kReservedByMgtrain);
    CHECK(other.claim(picked) == PortClaim::kTaken);
    CHECK(other.reserved_port() == picked);
  }
  SECTION("the probe's end releases it (the launcher exiting)") {
    launcher.reset();
    CHECK(other.claim(picked) == PortClaim::kTaken);
  }
}

TEST_CASE("picks skip ports another launcher reserved", "[port]") {
  // Many probes at once, as many launchers on one host: every pick differs from every other held one.
  std::vector<SocketPortProbe> probes(200);
  std::set<int> ports;
  for (SocketPortProbe& probe : probes) ports.insert(probe.pick_free_port());
  CHECK(ports.size() == probes.size());
}

TEST_CASE("picks come from below the kernel's range for outgoing connections' local ports", "[port]") {
  // A port of that range can become another job's connection's local port before rank 0 binds it.
  std::ifstream range_file("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  range_file >> low >> high;
  if (low - 10000 < 1024) {
    WARN("the ephemeral port range starts at " << low << ": no room below it, picks are the kernel's");
    return;
  }
  std::vector<SocketPortProbe> probes(20);
  for (SocketPortProbe& probe : probes) {
    const int port = probe.pick_free_port();
    CHECK(port < low);
    CHECK(port >= 10000);
  }
}

TEST_CASE("claiming a port a foreign program listens on says it is in use, and reserves nothing", "[port]") {
  int port = 0;
  Fd listener = foreign_listener(port);
  SocketPortProbe probe;
  CHECK(probe.claim(port) == PortClaim::kInUse);
  CHECK(probe.reserved_port() == 0);
  CHECK(PortReservation::take(port));
}
