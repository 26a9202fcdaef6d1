// `mgtrain launch --hosts a:4,b:4` / `--hostfile FILE`: one command for many hosts (like DeepSpeed's
// runner). It starts one node agent per host through a remote-shell template (`ssh {host}` by
// default), with node ranks in host order, node 0's address and port, the same run id and the same
// config and overrides; streams their output with a "[host] " prefix; and tears everything down on
// failure or Ctrl-C. The agents themselves meet, agree and share fate through the rendezvous
// (node_agent.hpp); this process only starts, watches and stops them: the agents are the children of
// an event loop (process/event_loop.hpp), the decisions hosts_policy.hpp's.
#pragma once

#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "config/config_request.hpp"
#include "util/environment.hpp"
#include "wire/frame_auth.hpp"

namespace mgtrain {

// The hosts to start agents on: launch.hosts as the config parsed it, or the list in the file launch.hostfile,
// read now (HostList::parse_hostfile). Throws UsageError when both or neither are given, or the file is unreadable
// or wrong (naming the file and line).
std::vector<HostSlots> hosts_of(const LaunchConfig& launch);

// The argument in single quotes for a POSIX shell ("it's" -> 'it'\''s').
std::string shell_quote(const std::string& text);

// What runs node `node_rank`'s agent: the remote-shell template split into words with {host} replaced,
// then the agent's shell command line as one argument (what ssh and `sh -c` expect).
std::vector<std::string> remote_agent_argv(const std::string& remote_shell, const std::string& host,
                                           const std::string& agent_command_line);

// The agent's shell command line: cd to `directory`, exec `mgtrain` launch with `arguments`.
std::string agent_command_line(const std::string& directory, const std::string& mgtrain,
                               const std::vector<std::string>& arguments);

// The `mgtrain launch` arguments of every node agent (node rank i = host i): request, loaded config
// and environment give the config path, overrides, flags and MGTRAIN_* settings to pass on. With launch.console_dedup
// auto and deduplication on for the job (hosts_console_dedup_on: from 4 ranks in the job, not on each host), every
// agent gets --console-dedup, so that each merges its own ranks' lines before this launcher merges the hosts'.
std::vector<std::vector<std::string>> agent_launch_arguments(const std::vector<HostSlots>& hosts,
                                                             const LaunchRequest& request, const LoadedConfig& loaded,
                                                             const EnvMap& environment);

// The test seam of the cross-host deduplication: its window in milliseconds (default: ConsoleDedup::kWindow, 200), so
// that a test can make "every rank's copy arrived within the window" certain on a busy machine
// (tests/integration/test_hosts_console.cpp). Read from the launcher's environment only; production never sets it.
inline constexpr const char* kHostsDedupWindowVariable = "MGTRAIN_TEST_HOSTS_DEDUP_WINDOW_MS";

// Runs the job on every host with `environment` passed on, messages and the agents' output on the two
// descriptors; returns the exit code (the agents' common one, 128+N when this process got signal N). Every agent
// reads `token` from its stdin (--rdzv-token-file -), so the rendezvous is authenticated without the secret on a
// command line or in a file on the remote hosts. The agents' lines are merged across hosts as hosts_console.hpp says
// when launch.console_dedup is on (auto: hosts_console_dedup_on), within kHostsDedupWindowVariable's window when
// `environment` sets it.
int run_hosts_launch(const LaunchRequest& request, const LoadedConfig& loaded, const EnvMap& environment, int stdout_fd,
                     int stderr_fd, const rdzv::RendezvousToken& token);

}  // namespace mgtrain
