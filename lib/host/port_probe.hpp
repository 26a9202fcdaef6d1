// Finding a free TCP port for the workers' store (torch's TCPStore, which rank 0 binds as MASTER_PORT) and keeping
// it from other mgtrain launches until then. Between the launcher's choice and rank 0's bind the port is free at TCP
// level, so another launch on this host could choose it too; every launcher therefore reserves the ports it hands
// out (PortReservation) and skips, or refuses, ports another one reserved. A program that is not mgtrain can still
// take the port: the supervisor recognises rank 0's "address already in use" and retries on a new port
// (docs/launch.md, "Master port"). Behind an interface so the launcher logic can be tested without sockets.
#pragma once

#include <optional>

#include "util/fd.hpp"

namespace mgtrain {

// One TCP port reserved among the mgtrain launchers of this host: the abstract-namespace AF_UNIX socket
// "\0mgtrain-port-<port>", bound while this object lives. Abstract names belong to the network namespace, as TCP
// ports do, binding one is atomic, and the kernel drops it with the last descriptor, so a launcher that dies (even
// by SIGKILL) leaves no stale reservation. The socket is close-on-exec: workers do not inherit it.
class PortReservation {
 public:
  PortReservation() = default;  // holds nothing
  // The reservation of `port`, or nullopt when another process (another mgtrain launch) holds it.
  static std::optional<PortReservation> take(int port);
  bool held() const { return socket_.valid(); }
  int port() const { return port_; }

 private:
  PortReservation(Fd socket, int port) : socket_(std::move(socket)), port_(port) {}
  Fd socket_;
  int port_ = 0;
};

enum class PortClaim { kTaken, kInUse, kReservedByMgtrain };

class PortProbe {
 public:
  virtual ~PortProbe() = default;
  // A port nobody listens on right now that no other mgtrain launch on this host reserved (the real probe: one below
  // the kernel's range for outgoing connections' local ports, so no other job's connection takes it meanwhile).
  // The probe keeps its reservation until the next pick_free_port or claim that succeeds, or its own end: the
  // probe's owner keeps the port for as long as its workers may bind it.
  virtual int pick_free_port() = 0;
  // Whether a listening socket could be bound to `port` now (TCP only, no reservation).
  virtual bool is_free(int port) = 0;
  // `port` (the user's choice) for this job: kTaken when it is free and no other mgtrain launch reserved it, and
  // then reserved as by pick_free_port. Probes without reservations (test fakes) only check is_free.
  virtual PortClaim claim(int port) { return is_free(port) ? PortClaim::kTaken : PortClaim::kInUse; }
};

// The real one. torch's TCPStore (hosted by rank 0) listens on every interface with SO_REUSEADDR, so the checks
// bind the wildcard address the same way, IPv4 and, where the machine has it, IPv6.
class SocketPortProbe : public PortProbe {
 public:
  int pick_free_port() override;
  bool is_free(int port) override;
  PortClaim claim(int port) override;
  // The port this probe holds now (0: none).
  int reserved_port() const { return reservation_.port(); }

 private:
  // Reserves `port` and checks it at TCP level on both families; holds it (in place of the port held before) when it
  // is free and no other mgtrain launch reserved it.
  bool hold_if_free(int port);

  PortReservation reservation_;
};

}  // namespace mgtrain
