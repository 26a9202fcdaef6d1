// Linux network namespaces as stand-in hosts for the multi-node tests: N namespaces, each with an
// eth0 at 10.77.0.<i+1>/24, joined by a bridge that lives in one more namespace, so nothing is added
// to the machine's own network stack. Needs root (ip netns); where the kernel or the user cannot,
// the fixture says why and the tests skip. Everything is deleted when the fixture goes away.
#pragma once

#include <string>
#include <vector>

namespace mgtrain::testing {

class NetnsHosts {
 public:
  explicit NetnsHosts(int count);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  // Empty when the namespaces are up; otherwise why they could not be made.
  const std::string& skip_reason() const { return skip_reason_; }
  int count() const { return static_cast<int>(names_.size()); }
  const std::string& name(int host) const { return names_.at(host); }
  std::string address(int host) const { return "10.77.0." + std::to_string(host + 1); }
  // argv prefix that runs a program on `host`: {"/usr/sbin/ip", "netns", "exec", NAME}
  std::vector<std::string> exec_prefix(int host) const;
  const std::string& ip_binary() const { return ip_; }
  // Takes the host off the network (its eth0 down), as a pulled cable would.
  void cut_link(int host);
  // Puts it back (eth0 up; the kernel restores its route), as a cable plugged in again would.
  void restore_link(int host);

 private:
  bool run(const std::vector<std::string>& argv);

  std::string ip_;
  std::string switch_name_;
  std::vector<std::string> names_;
  std::string skip_reason_;
};

}  // namespace mgtrain::testing
