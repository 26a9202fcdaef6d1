// A node agent (`mgtrain launch`) in a network namespace for the multi-node tests, the skip for
// machines without namespaces, and the "KEY=VALUE ..." lines the test workers write.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "launch_fixture.hpp"
#include "netns_hosts.hpp"

// Skips the rest of a test case (with the reason) where network namespaces cannot be made.
#define REQUIRE_HOSTS(hosts)                                          \
  do {                                                                \
    if (!(hosts).skip_reason().empty()) {                             \
      WARN("SKIP: no network namespaces: " << (hosts).skip_reason()); \
      return;                                                         \
    }                                                                 \
  } while (false)

namespace mgtrain::testing {

// One `mgtrain launch` in a namespace. Killed (with its workers, by their death signal and the
// orphan guard) if the test ends before it does.
class Agent {
 public:
  // `environment`: "NAME=VALUE" settings added to the launcher's environment (through env(1)).
  Agent(const NetnsHosts& hosts, int host, const std::vector<std::string>& launch_args,
        const std::string& output_prefix, const std::vector<std::string>& environment = {}) {
    std::vector<std::string> argv = hosts.exec_prefix(host);
    if (!environment.empty()) {
      argv.push_back("env");
      argv.insert(argv.end(), environment.begin(), environment.end());
    }
    argv.push_back(std::string(MGTRAIN_BIN_DIR) + "/mgtrain");
    argv.push_back("launch");
    argv.insert(argv.end(), launch_args.begin(), launch_args.end());
    process_ = start_process(argv, output_prefix);
  }
  ~Agent() {
    if (!exit_code_ && process_.pid > 0) {
      kill(process_.pid, SIGKILL);
      wait_for_exit(process_.pid, std::chrono::seconds(5));
    }
  }
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  pid_t pid() const { return process_.pid; }
  // The exit code, or -1 when it did not end within `timeout`.
  int wait(std::chrono::milliseconds timeout) {
    if (!exit_code_) exit_code_ = wait_for_exit(process_.pid, timeout);
    return exit_code_ ? *exit_code_ : -1;
  }
  std::string out() const { return read_text(process_.out_path); }
  std::string err() const { return read_text(process_.err_path); }

 private:
  ChildProcess process_;
  std::optional<int> exit_code_;
};

// "KEY=VALUE KEY=VALUE" -> map
inline std::map<std::string, std::string> fields_of(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::regex pair(R"((\w+)=(\S*))");
  for (std::sregex_iterator it(line.begin(), line.end(), pair), end; it != end; ++it) fields[(*it)[1]] = (*it)[2];
  return fields;
}

}  // namespace mgtrain::testing
