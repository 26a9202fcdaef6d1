// One command for many hosts: start, stream and stop one node agent per host (see hosts_launch.hpp).
#include "multinode/hosts_launch.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "supervise/console_writer.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/fd.hpp"
#include "util/file_io.hpp"
#include "util/line_splitter.hpp"
#include "util/timespec.hpp"
#include "supervise/orphan_guard.hpp"
#include "supervise/signal_channel.hpp"
#include "util/value_parsing.hpp"
#include "util/worker_binary.hpp"
#include "supervise/worker_process.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultMasterPort = 29500;  // torchrun's
// After the first agent failed: how long the others get to end by themselves (they hear of it through
// the rendezvous within the grace period) before this process stops them.
constexpr double kSettleMarginS = 5.0;
constexpr auto kDrainTimeout = std::chrono::seconds(2);

// Keys this launcher sets for every agent itself, or that make no sense to pass on.
const std::set<std::string> kOwnKeys = {"launch.hosts",     "launch.hostfile",    "launch.remote_shell",
                                        "launch.nnodes",    "launch.node_rank",   "launch.master_addr",
                                        "launch.master_port", "launch.run_id",    "launch.exit_with_stdin",
                                        "launch.rdzv_endpoint", "launch.rdzv_backend"};

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(value));
}

int parse_slots(const std::string& text, const std::string& where) {
  auto value = parse_int(trim(text));
  if (!value || *value < 1 || *value > 1 << 20) {
    throw UsageError(fmt::format("{}: '{}' is not a number of workers (slots): use a positive number", where, text));
  }
  return static_cast<int>(*value);
}

std::string address_of(const std::string& host) {
  std::size_t at = host.find('@');  // user@host for ssh
  return at == std::string::npos ? host : host.substr(at + 1);
}

struct RemoteAgent {
  std::string host;
  pid_t pid = -1;
  Fd stdin_pipe;  // write end: closing it tells an --exit-with-stdin agent to stop
  bool alive = false;
  std::optional<ExitStatus> status;
  Clock::time_point ended{};
  struct Stream {
    Fd fd;
    bool is_stderr = false;
    LineSplitter splitter;
  };
  Stream out, err;
};

bool stops_the_job(int signal) { return signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGQUIT; }

}  // namespace

std::vector<HostSlots> parse_hosts(const std::string& text) {
  std::vector<HostSlots> hosts;
  for (const std::string& part : split(text, ',')) {
    std::string entry = trim(part);
    if (entry.empty()) continue;
    HostSlots slot;
    std::size_t colon = entry.rfind(':');
    slot.host = colon == std::string::npos ? entry : entry.substr(0, colon);
    if (colon != std::string::npos) slot.slots = parse_slots(entry.substr(colon + 1), "launch.hosts entry '" + entry + "'");
    if (slot.host.empty()) throw UsageError("launch.hosts entry '" + entry + "' has no host name");
    hosts.push_back(slot);
  }
  if (hosts.empty()) throw UsageError("launch.hosts '" + text + "' names no host: write e.g. --hosts node0:4,node1:4");
  return hosts;
}

std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& name) {
  std::vector<HostSlots> hosts;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;
    HostSlots slot;
    slot.host = host;
    const std::string where = fmt::format("{}:{}", name, number);
    while (words >> word) {
      if (word.rfind("slots=", 0) == 0) {
        slot.slots = parse_slots(word.substr(6), where);
      } else {
        throw UsageError(fmt::format("{}: unexpected '{}': write lines like `node0 slots=4`", where, word));
      }
    }
    hosts.push_back(slot);
  }
  if (hosts.empty()) throw UsageError(name + ": the hostfile names no host: write one line per host, e.g. `node0 slots=4`");
  return hosts;
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
  if (loaded.origin_of("launch.nnodes") != "default" && launch.nnodes != std::to_string(nnodes)) {
    throw UsageError(fmt::format("launch.nnodes is {} but the host list names {} host{}: drop --nnodes, the hosts decide",
                                 launch.nnodes, nnodes, nnodes == 1 ? "" : "s"));
  }
  if (!trim(launch.rdzv_endpoint).empty()) {
    throw UsageError("--hosts/--hostfile start a static job (node ranks in host order): drop --rdzv-endpoint");
  }
  const bool slots_given = hosts.front().slots > 0;
  std::set<int> slot_counts;
  for (const HostSlots& host : hosts) {
    if ((host.slots > 0) != slots_given) {
      throw UsageError("give a number of workers for every host or for none (" + hosts.front().host + " vs " + host.host +
                       "); without one, --nproc applies to every host");
    }
    slot_counts.insert(host.slots);
  }
  const bool uneven = slot_counts.size() > 1;
  const std::string master_addr = loaded.origin_of("launch.master_addr") != "default" ? launch.master_addr : address_of(hosts.front().host);
  const int master_port = launch.master_port > 0 ? static_cast<int>(launch.master_port) : kDefaultMasterPort;

  // What every agent gets besides its node rank: the user's settings, as --set so that any spelling works.
  std::vector<std::string> shared;
  std::set<std::string> passed;
  auto pass = [&](const std::string& key, const std::string& value) {
    if (kOwnKeys.count(key) || (slots_given && key == "launch.nproc") || (uneven && key == "launch.allow_uneven_nproc")) return;
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
  for (const FlagSetting& flag : request.config.flags) pass(flag.key, flag.value);

  std::vector<std::vector<std::string>> all;
  for (int rank = 0; rank < nnodes; ++rank) {
    std::vector<std::string> args = {"--nnodes", std::to_string(nnodes), "--node-rank", std::to_string(rank),
                                     "--master-addr", master_addr, "--master-port", std::to_string(master_port),
                                     "--run-id", launch.run_id, "--exit-with-stdin"};
    if (slots_given) {
      args.push_back("--nproc");
      args.push_back(std::to_string(hosts[rank].slots));
    }
    if (uneven) args.push_back("--allow-uneven-nproc");
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

int run_hosts_launch(const LaunchRequest& request, const LoadedConfig& loaded, const LaunchEnvironment& outside) {
  const LaunchConfig& launch = loaded.config.launch;
  EnvMap environment = outside.environment ? *outside.environment : current_environment();
  if (!trim(launch.hosts).empty() && !trim(launch.hostfile).empty()) {
    throw UsageError("give the hosts either with --hosts or with --hostfile, not both");
  }
  std::vector<HostSlots> hosts;
  if (!trim(launch.hosts).empty()) {
    hosts = parse_hosts(launch.hosts);
  } else {
    const std::optional<std::string> text = try_read_file(launch.hostfile);
    if (!text) throw UsageError("launch.hostfile " + launch.hostfile + ": cannot read it: " + std::strerror(errno));
    hosts = parse_hostfile(*text, launch.hostfile);
  }
  const std::vector<std::vector<std::string>> arguments = agent_launch_arguments(hosts, request, loaded, environment);
  const std::string mgtrain = executable_directory() + "/mgtrain";
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) throw SystemError("getcwd()", errno);

  SignalChannel signals;
  OrphanGuard guard;
  ConsoleWriter console(outside.stdout_fd, outside.stderr_fd);
  auto say = [&](const std::string& line) { console.message(log::Level::Info, "{}", line); };
  std::vector<std::unique_ptr<RemoteAgent>> agents;
  const std::vector<std::string> environ_strings = to_environ_strings(environment);

  auto kill_all = [&](int signal) {
    for (auto& agent : agents) {
      if (agent->alive) signal_process_group(agent->pid, signal);
    }
  };
  auto close_stdin_pipes = [&] {
    for (auto& agent : agents) {
      agent->stdin_pipe.reset();
    }
  };
  try {
    std::string started;
    for (std::size_t rank = 0; rank < hosts.size(); ++rank) {
      auto agent = std::make_unique<RemoteAgent>();
      agent->host = hosts[rank].host;
      Pipe stdin_pipe = make_pipe();
      WorkerProcessSpec spec;
      spec.argv = remote_agent_argv(launch.remote_shell, hosts[rank].host, agent_command_line(cwd, mgtrain, arguments[rank]));
      spec.environment = environ_strings;
      spec.signal_mask = signals.original_mask();
      spec.announce_fd = guard.announce_fd();
      spec.stdin_fd = stdin_pipe.read.get();  // the child gets a copy
      WorkerProcess process = start_worker_process(spec);
      agent->stdin_pipe = std::move(stdin_pipe.write);
      agent->pid = process.pid;
      agent->alive = true;
      agent->out.fd = std::move(process.stdout_pipe);
      agent->err.fd = std::move(process.stderr_pipe);
      agent->err.is_stderr = true;
      agents.push_back(std::move(agent));
      started += fmt::format("{}{} (node {}{})", rank ? ", " : "", hosts[rank].host, rank,
                             hosts[rank].slots ? fmt::format(", {} workers", hosts[rank].slots) : "");
    }
    say(fmt::format("started {} node agent{} through `{}`: {}", hosts.size(), hosts.size() == 1 ? "" : "s",
                    launch.remote_shell, started));
  } catch (...) {
    kill_all(SIGKILL);
    for (auto& agent : agents) reap(agent->pid);
    close_stdin_pipes();
    throw;
  }

  std::optional<int> launcher_signal;
  std::optional<Clock::time_point> settle_deadline, kill_deadline, drain_deadline;
  std::optional<std::size_t> first_failure;  // index into agents
  const double grace = launch.grace_period;

  auto stop_all = [&](int signal, Clock::time_point now) {
    kill_all(signal);
    close_stdin_pipes();
    // The agents stop their own workers within their grace period, then exit.
    if (!kill_deadline) kill_deadline = now + seconds(grace + 2.0);
  };

  std::vector<pollfd> fds;
  std::vector<RemoteAgent::Stream*> streams;
  char buffer[65536];
  while (true) {
    Clock::time_point now = Clock::now();
    bool any_alive = false, any_open = false;
    for (auto& agent : agents) {
      any_alive = any_alive || agent->alive;
      any_open = any_open || agent->out.fd || agent->err.fd;
    }
    if (!any_alive) {
      if (!any_open) break;
      if (!drain_deadline) drain_deadline = now + kDrainTimeout;
      if (now >= *drain_deadline) break;
    }
    std::optional<Clock::time_point> wake;
    for (auto deadline : {settle_deadline, kill_deadline, drain_deadline}) {
      if (deadline && (!wake || *deadline < *wake)) wake = deadline;
    }
    fds.clear();
    streams.clear();
    fds.push_back(pollfd{signals.fd(), POLLIN, 0});
    for (auto& agent : agents) {
      for (RemoteAgent::Stream* stream : {&agent->out, &agent->err}) {
        if (!stream->fd) continue;
        fds.push_back(pollfd{stream->fd.get(), POLLIN, 0});
        streams.push_back(stream);
      }
    }
    timespec timeout{};
    if (wake) timeout = to_timespec(*wake - now);
    int ready = ppoll(fds.data(), fds.size(), wake ? &timeout : nullptr, nullptr);
    if (ready < 0 && errno != EINTR) throw SystemError("ppoll() in the hosts launcher", errno);
    now = Clock::now();

    for (std::size_t index = 1; ready > 0 && index < fds.size(); ++index) {
      if (fds[index].revents == 0) continue;
      RemoteAgent::Stream& stream = *streams[index - 1];
      RemoteAgent* owner = nullptr;
      for (auto& agent : agents) {
        if (&agent->out == &stream || &agent->err == &stream) owner = agent.get();
      }
      const std::string prefix = "[" + owner->host + "] ";
      ssize_t got = read(stream.fd.get(), buffer, sizeof buffer);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      auto sink = [&](std::string_view line) { console.add_line(stream.is_stderr, prefix, line); };
      if (got <= 0) {
        stream.splitter.finish(sink);
        stream.fd.reset();
        continue;
      }
      stream.splitter.feed(std::string_view(buffer, static_cast<std::size_t>(got)), sink);
    }

    if (ready > 0 && fds[0].revents != 0) {
      for (int signal : signals.take_pending()) {
        if (signal == SIGCHLD) {
          for (std::size_t index = 0; index < agents.size(); ++index) {
            RemoteAgent& agent = *agents[index];
            if (!agent.alive) continue;
            const std::optional<ExitStatus> exited = collect_exit(agent.pid, guard);
            if (!exited) continue;
            const ExitStatus& status = *exited;
            agent.alive = false;
            agent.status = status;
            agent.ended = now;
            agent.stdin_pipe.reset();
            const bool bad = !status.success() && !(!status.signaled && status.value == exit_code::kStoppedAfterCheckpoint);
            if (bad && !first_failure && !launcher_signal) {
              first_failure = index;
              settle_deadline = now + seconds(grace + kSettleMarginS);
              say(fmt::format("the agent on {} ended with {}; the others should follow within seconds (stopped in {:.0f} s "
                              "otherwise)", agent.host, status.describe(), grace + kSettleMarginS));
            }
          }
        } else if (stops_the_job(signal)) {
          if (launcher_signal) {
            kill_all(SIGKILL);  // the second Ctrl-C
          } else {
            launcher_signal = signal;
            say("got " + signal_name(signal) + ": stopping every node agent");
            stop_all(signal, now);
          }
        } else {
          kill_all(signal);  // SIGUSR1/SIGUSR2: the agents forward them to their workers
        }
      }
    }

    if (settle_deadline && now >= *settle_deadline) {
      settle_deadline.reset();
      bool any = false;
      for (auto& agent : agents) any = any || agent->alive;
      if (any) {
        say("stopping the node agents that are still running");
        stop_all(SIGTERM, now);
      }
    }
    if (kill_deadline && now >= *kill_deadline) {
      kill_deadline.reset();
      kill_all(SIGKILL);
    }
    console.flush();
  }
  for (auto& agent : agents) {
    for (RemoteAgent::Stream* stream : {&agent->out, &agent->err}) {
      if (stream->fd) {
        stream->splitter.finish([&](std::string_view line) {
          console.add_line(stream->is_stderr, "[" + agent->host + "] ", line);
        });
        stream->fd.reset();
      }
    }
  }
  close_stdin_pipes();

  int code = 0;
  if (launcher_signal) {
    code = 128 + *launcher_signal;
    say(fmt::format("stopped by {}; every node agent has exited (exit code {})", signal_name(*launcher_signal), code));
  } else if (first_failure) {
    code = agents[*first_failure]->status->as_exit_code();
    say(fmt::format("job failed on {} host{} (exit code {}; each agent's report is above, its files in its "
                    "node_<rank> directory)", agents.size(), agents.size() == 1 ? "" : "s", code));
  } else {
    for (auto& agent : agents) {
      if (agent->status && agent->status->value == exit_code::kStoppedAfterCheckpoint) code = exit_code::kStoppedAfterCheckpoint;
    }
  }
  console.flush();
  return code;
}

}  // namespace mgtrain
