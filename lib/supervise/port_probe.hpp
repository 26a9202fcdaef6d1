// Finding a free TCP port for the rendezvous store, and checking that a chosen one is free.
// Behind an interface so the launcher logic can be tested without sockets.
#pragma once

namespace mgtrain {

class PortProbe {
 public:
  virtual ~PortProbe() = default;
  // A port nobody listens on right now (the kernel's choice).
  virtual int pick_free_port() = 0;
  // Whether a listening socket could be bound to `port` now.
  virtual bool is_free(int port) = 0;
};

// The real one. torch's TCPStore (hosted by rank 0) listens on every interface, so the checks bind
// the wildcard address, IPv4 and, where the machine has it, IPv6.
class SocketPortProbe : public PortProbe {
 public:
  int pick_free_port() override;
  bool is_free(int port) override;
};

}  // namespace mgtrain
