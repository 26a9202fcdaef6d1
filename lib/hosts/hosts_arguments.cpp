// What each host's node agent is started with for `mgtrain launch --hosts/--hostfile` (see hosts_launch.hpp):
// the host list (the parsed --hosts, or the hostfile read now), the remote-shell command line and every agent's
// `mgtrain launch` arguments.
#include "hosts/hosts_launch.hpp"

#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "config/config_file.hpp"
#include "contract/worker_identity.hpp"
#include "hosts/hosts_console.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

// Keys this launcher sets for every agent itself, or that make no sense to pass on.
const std::set<std::string> kOwnKeys = {"launch.hosts",         "launch.hostfile",     "launch.remote_shell",
                                        "launch.nnodes",        "launch.node_rank",    "launch.master_addr",
                                        "launch.master_port",   "launch.run_id",       "launch.exit_with_stdin",
                                        "launch.rdzv_endpoint", "launch.rdzv_backend", "launch.rdzv_token_file"};

std::string address_of(const std::string& host) {
  std::size_t at = host.find('@');  // user@host for ssh
  return at == std::string::npos ? host : host.substr(at + 1);
}

}  // namespace

std::vector<HostSlots> hosts_of(const LaunchConfig& launch) {
  const bool from_file = !trim(launch.hostfile).empty();
  if (!launch.hosts.empty() && from_file) {
    throw UsageError("give the hosts either with --hosts or with --hostfile, not both");
  }
  if (!launch.hosts.empty()) return launch.hosts.hosts;
  if (!from_file) throw UsageError("no hosts to start node agents on: give --hosts or --hostfile");
  // Bounded like a config file: a FIFO would block, /dev/zero would fill memory.
  const std::string text = read_bounded_file(launch.hostfile, "hostfile");
  const Parsed<HostList> hosts = HostList::parse_hostfile(text, launch.hostfile);
  if (!hosts.ok()) throw UsageError(hosts.error());
  return hosts.value().hosts;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::vector<std::string> remote_agent_argv(const std::string& remote_shell, const std::string& host,
                                           const std::string& agent_command_line) {
  std::vector<std::string> argv;
  std::istringstream words(remote_shell);
  std::string word;
  while (words >> word) {
    for (std::size_t at = word.find("{host}"); at != std::string::npos; at = word.find("{host}", at + host.size())) {
      word.replace(at, 6, host);
    }
    argv.push_back(word);
  }
  if (argv.empty()) throw UsageError("launch.remote_shell is empty: give a command such as `ssh {host}`");
  argv.push_back(agent_command_line);
  return argv;
}

std::string agent_command_line(const std::string& directory, const std::string& mgtrain,
                               const std::vector<std::string>& arguments) {
  std::string line = "cd " + shell_quote(directory) + " && exec " + shell_quote(mgtrain) + " launch";
  for (const std::string& argument : arguments) line += " " + shell_quote(argument);
  return line;
}

std::vector<std::vector<std::string>> agent_launch_arguments(const std::vector<HostSlots>& hosts,
                                                             const LaunchRequest& request, const LoadedConfig& loaded,
                                                             const EnvMap& environment) {
  const LaunchConfig& launch = loaded.config.launch;
  const int nnodes = static_cast<int>(hosts.size());
  if (!loaded.is_default("launch.nnodes") && launch.nnodes != NodeRange::exactly(nnodes)) {
    throw UsageError(
        fmt::format("launch.nnodes is {} but the host list names {} host{}: drop --nnodes, the hosts decide",
                    launch.nnodes.text(), nnodes, nnodes == 1 ? "" : "s"));
  }
  if (!launch.rdzv_endpoint.empty()) {
    throw UsageError("--hosts/--hostfile start a static job (node ranks in host order): drop --rdzv-endpoint");
  }
  const bool slots_given = hosts.front().slots > 0;
  std::set<int> slot_counts;
  for (const HostSlots& host : hosts) {
    if ((host.slots > 0) != slots_given) {
      throw UsageError("give a number of workers for every host or for none (" + hosts.front().host + " vs " +
                       host.host + "); without one, --nproc applies to every host");
    }
    slot_counts.insert(host.slots);
  }
  const bool uneven = slot_counts.size() > 1;
  const std::string master_addr =
      !loaded.is_default("launch.master_addr") ? launch.master_addr : address_of(hosts.front().host);
  const int master_port = launch.master_port > 0 ? static_cast<int>(launch.master_port) : kTorchDefaultMasterPort;

  // What every agent gets besides its node rank: the user's settings, as --set so that any spelling works.
  std::vector<std::string> shared;
  std::set<std::string> passed;
  auto pass = [&](const std::string& key, const std::string& value) {
    if (kOwnKeys.count(key) || (slots_given && key == "launch.nproc") || (uneven && key == "launch.allow_uneven_nproc"))
      return;
    shared.push_back("--set");
    shared.push_back(key + "=" + value);
    passed.insert(key);
  };
  // MGTRAIN_* variables do not travel over ssh: what they set here is passed on explicitly.
  for (const auto& [key, where] : loaded.origin) {
    const std::string prefix = "environment ";
    if (where.rfind(prefix, 0) != 0) continue;
    auto variable = environment.find(where.substr(prefix.size()));
    if (variable != environment.end()) pass(key, variable->second);
  }
  for (const std::string& assignment : request.config.overrides) {
    std::size_t equals = assignment.find('=');
    pass(trim(assignment.substr(0, equals)), equals == std::string::npos ? "" : assignment.substr(equals + 1));
  }
  for (const FlagSetting& setting : request.config.environment) pass(setting.key, setting.value);  // PET_*, converted
  for (const FlagSetting& flag : request.config.flags) pass(flag.key, flag.value);

  // auto counts the job's ranks here, where each agent would count its own: an agent of a job with enough ranks
  // merges its ranks' lines even when it runs fewer itself (on and off travel with the flags above).
  const bool agents_dedup =
      launch.console_dedup == ConsoleDedupMode::Auto &&
      hosts_console_dedup_on(launch.console_dedup, request.config.personality, job_ranks(hosts, launch.nproc));

  std::vector<std::vector<std::string>> all;
  for (int rank = 0; rank < nnodes; ++rank) {
    std::vector<std::string> args = {"--nnodes",
                                     std::to_string(nnodes),
                                     "--node-rank",
                                     std::to_string(rank),
                                     "--master-addr",
                                     master_addr,
                                     "--master-port",
                                     std::to_string(master_port),
                                     "--run-id",
                                     launch.run_id,
                                     "--exit-with-stdin",
                                     "--rdzv-token-file",
                                     "-"};  // the token arrives on stdin
    if (slots_given) {
      args.push_back("--nproc");
      args.push_back(std::to_string(hosts[rank].slots));
    }
    if (uneven) args.push_back("--allow-uneven-nproc");
    if (agents_dedup) args.push_back("--console-dedup");
    args.insert(args.end(), shared.begin(), shared.end());
    if (request.config.path) args.push_back(*request.config.path);
    if (!request.command.empty()) {
      args.push_back("--");
      args.insert(args.end(), request.command.begin(), request.command.end());
    }
    all.push_back(args);
  }
  return all;
}

}  // namespace mgtrain
