// Setting up and tearing down the namespace "hosts" with the `ip` tool.
#include "netns_hosts.hpp"

#include <unistd.h>

#include <atomic>

#include "process/run_capture.hpp"

namespace mgtrain::testing {
namespace {

std::string find_ip() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

std::string last_line(const std::string& text) {
  std::string trimmed = text;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ')) trimmed.pop_back();
  std::size_t newline = trimmed.rfind('\n');
  return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

}  // namespace

bool NetnsHosts::run(const std::vector<std::string>& argv) {
  CaptureOptions options;
  options.timeout_s = 20;
  CapturedRun result = run_and_capture(argv, options);
  if (result.exit_code == 0) return true;
  if (skip_reason_.empty()) {
    std::string command;
    for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
    skip_reason_ = command + " failed: " + last_line(result.err);
  }
  return false;
}

NetnsHosts::NetnsHosts(int count) {
  ip_ = find_ip();
  if (ip_.empty()) {
    skip_reason_ = "the ip tool (iproute2) is not installed";
    return;
  }
  if (geteuid() != 0) {
    skip_reason_ = "network namespaces need root (ip netns add)";
    return;
  }
  static std::atomic<int> serial{0};
  const std::string tag = std::to_string(getpid() % 100000) + "x" + std::to_string(serial++ % 100);
  switch_name_ = "mgt" + tag + "sw";
  if (!run({ip_, "netns", "add", switch_name_})) return;
  if (!run({ip_, "-n", switch_name_, "link", "add", "br0", "type", "bridge"}) ||
      !run({ip_, "-n", switch_name_, "link", "set", "br0", "up"})) {
    return;
  }
  for (int host = 0; host < count; ++host) {
    std::string name = "mgt" + tag + "h" + std::to_string(host);
    if (!run({ip_, "netns", "add", name})) return;
    names_.push_back(name);
    // Interface names are made in the machine's namespace first: short and unique (15 characters at most).
    std::string outer = "mg" + tag + "a" + std::to_string(host), inner = "mg" + tag + "b" + std::to_string(host);
    if (!run({ip_, "link", "add", inner, "type", "veth", "peer", "name", outer}) ||
        !run({ip_, "link", "set", inner, "netns", name, "name", "eth0"}) ||
        !run({ip_, "link", "set", outer, "netns", switch_name_}) ||
        !run({ip_, "-n", switch_name_, "link", "set", outer, "master", "br0", "up"}) ||
        !run({ip_, "-n", name, "addr", "add", address(host) + "/24", "dev", "eth0"}) ||
        !run({ip_, "-n", name, "link", "set", "eth0", "up"}) || !run({ip_, "-n", name, "link", "set", "lo", "up"})) {
      run({ip_, "link", "del", outer});  // if it is still out here
      return;
    }
  }
}

NetnsHosts::~NetnsHosts() {
  // Deleting a namespace deletes its interfaces, and with them the veth peers and the bridge.
  std::string keep = skip_reason_;
  for (const std::string& name : names_) run({ip_, "netns", "del", name});
  if (!switch_name_.empty()) run({ip_, "netns", "del", switch_name_});
  skip_reason_ = keep;
}

std::vector<std::string> NetnsHosts::exec_prefix(int host) const { return {ip_, "netns", "exec", name(host)}; }

void NetnsHosts::cut_link(int host) { run({ip_, "-n", name(host), "link", "set", "eth0", "down"}); }

void NetnsHosts::restore_link(int host) { run({ip_, "-n", name(host), "link", "set", "eth0", "up"}); }

}  // namespace mgtrain::testing
