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

#include <fmt/format.h>

#include "output/console_writer.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/fd.hpp"
#include "util/file_io.hpp"
#include "output/live_line_splitter.hpp"
#include "util/timespec.hpp"
#include "supervise/orphan_guard.hpp"
#include "supervise/signal_channel.hpp"
#include "util/value_parsing.hpp"
#include "util/worker_binary.hpp"
#include "supervise/worker_process.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

// After the first agent failed: how long the others get to end by themselves (they hear of it through
// the rendezvous within the grace period) before this process stops them.
constexpr double kSettleMarginS = 5.0;
constexpr auto kDrainTimeout = std::chrono::seconds(2);

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(value));
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
    LiveLineSplitter splitter;  // an agent's unfinished lines ('\r' updates) are shown live too
  };
  Stream out, err;
};

bool stops_the_job(int signal) { return signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGQUIT; }

// The hosts given by --hosts or --hostfile.
std::vector<HostSlots> hosts_of(const LaunchConfig& launch) {
  if (!trim(launch.hosts).empty() && !trim(launch.hostfile).empty()) {
    throw UsageError("give the hosts either with --hosts or with --hostfile, not both");
  }
  if (!trim(launch.hosts).empty()) return parse_hosts(launch.hosts);
  const std::optional<std::string> text = try_read_file(launch.hostfile);
  if (!text) throw UsageError("launch.hostfile " + launch.hostfile + ": cannot read it: " + std::strerror(errno));
  return parse_hostfile(*text, launch.hostfile);
}

// One node agent per host under one ppoll loop: their output prefixed with the host, signals passed on,
// the others stopped after the first failure, the job's exit code at the end.
class HostsLaunch {
 public:
  HostsLaunch(const LaunchConfig& launch, const LaunchEnvironment& outside)
      : launch_(launch), console_(outside.stdout_fd, outside.stderr_fd) {}

  void start_agents(const std::vector<HostSlots>& hosts, const std::vector<std::vector<std::string>>& arguments,
                    const EnvMap& environment);
  int run();

 private:
  void say(const std::string& line) { console_.message(log::Level::Info, "{}", line); }
  void kill_all(int signal);
  void close_stdin_pipes();
  void stop_all(int signal, Clock::time_point now);
  // False once every agent ended and its output is read (or the drain timeout passed).
  bool still_running(Clock::time_point now);
  std::optional<Clock::time_point> next_deadline() const;
  void pump_streams(const std::vector<pollfd>& fds, const std::vector<RemoteAgent::Stream*>& streams, Clock::time_point now);
  void release_held_pieces(Clock::time_point now);
  LiveLineSplitter::PieceSink console_sink(RemoteAgent::Stream& stream, const std::string& host);
  void handle_signals(Clock::time_point now);
  void handle_agent_exits(Clock::time_point now);
  void handle_deadlines(Clock::time_point now);
  void drain_streams();
  int exit_code();

  const LaunchConfig& launch_;
  SignalChannel signals_;
  OrphanGuard guard_;
  ConsoleWriter console_;
  std::vector<std::unique_ptr<RemoteAgent>> agents_;
  std::optional<int> launcher_signal_;
  std::optional<Clock::time_point> settle_deadline_, kill_deadline_, drain_deadline_;
  std::optional<std::size_t> first_failure_;  // index into agents_
};

void HostsLaunch::kill_all(int signal) {
  for (auto& agent : agents_) {
    if (agent->alive) signal_process_group(agent->pid, signal);
  }
}

void HostsLaunch::close_stdin_pipes() {
  for (auto& agent : agents_) agent->stdin_pipe.reset();
}

void HostsLaunch::stop_all(int signal, Clock::time_point now) {
  kill_all(signal);
  close_stdin_pipes();
  // The agents stop their own workers within their grace period, then exit.
  if (!kill_deadline_) kill_deadline_ = now + seconds(launch_.grace_period + 2.0);
}

void HostsLaunch::start_agents(const std::vector<HostSlots>& hosts, const std::vector<std::vector<std::string>>& arguments,
                               const EnvMap& environment) {
  const std::string mgtrain = executable_directory() + "/mgtrain";
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) throw SystemError("getcwd()", errno);
  const std::vector<std::string> environ_strings = to_environ_strings(environment);
  try {
    std::string started;
    for (std::size_t rank = 0; rank < hosts.size(); ++rank) {
      auto agent = std::make_unique<RemoteAgent>();
      agent->host = hosts[rank].host;
      Pipe stdin_pipe = make_pipe();
      WorkerProcessSpec spec;
      spec.argv = remote_agent_argv(launch_.remote_shell, hosts[rank].host, agent_command_line(cwd, mgtrain, arguments[rank]));
      spec.environment = environ_strings;
      spec.signal_mask = signals_.original_mask();
      spec.announce_fd = guard_.announce_fd();
      spec.stdin_fd = stdin_pipe.read.get();  // the child gets a copy
      WorkerProcess process = start_worker_process(spec);
      agent->stdin_pipe = std::move(stdin_pipe.write);
      agent->pid = process.pid;
      agent->alive = true;
      agent->out.fd = std::move(process.stdout_pipe);
      agent->err.fd = std::move(process.stderr_pipe);
      agent->err.is_stderr = true;
      agents_.push_back(std::move(agent));
      started += fmt::format("{}{} (node {}{})", rank ? ", " : "", hosts[rank].host, rank,
                             hosts[rank].slots ? fmt::format(", {} workers", hosts[rank].slots) : "");
    }
    say(fmt::format("started {} node agent{} through `{}`: {}", hosts.size(), hosts.size() == 1 ? "" : "s",
                    launch_.remote_shell, started));
  } catch (...) {
    kill_all(SIGKILL);
    for (auto& agent : agents_) reap(agent->pid);
    close_stdin_pipes();
    throw;
  }
}

bool HostsLaunch::still_running(Clock::time_point now) {
  bool any_alive = false, any_open = false;
  for (auto& agent : agents_) {
    any_alive = any_alive || agent->alive;
    any_open = any_open || agent->out.fd || agent->err.fd;
  }
  if (any_alive) return true;
  if (!any_open) return false;
  if (!drain_deadline_) drain_deadline_ = now + kDrainTimeout;
  return now < *drain_deadline_;
}

std::optional<Clock::time_point> HostsLaunch::next_deadline() const {
  std::optional<Clock::time_point> wake;
  for (auto deadline : {settle_deadline_, kill_deadline_, drain_deadline_}) {
    if (deadline && (!wake || *deadline < *wake)) wake = deadline;
  }
  for (const auto& agent : agents_) {
    for (const RemoteAgent::Stream* stream : {&agent->out, &agent->err}) {
      const auto due = stream->splitter.deadline();
      if (due && (!wake || *due < *wake)) wake = due;
    }
  }
  return wake;
}

LiveLineSplitter::PieceSink HostsLaunch::console_sink(RemoteAgent::Stream& stream, const std::string& host) {
  return [this, &stream, prefix = "[" + host + "] "](const LiveLineSplitter::Piece& piece) {
    console_.add_piece(stream.is_stderr, &stream, prefix, piece.text, piece.ends_line);
  };
}

// Reads what the ready streams have and queues their lines, "[host] " first (unfinished ones after a short hold).
void HostsLaunch::pump_streams(const std::vector<pollfd>& fds, const std::vector<RemoteAgent::Stream*>& streams,
                               Clock::time_point now) {
  char buffer[65536];
  for (std::size_t index = 1; index < fds.size(); ++index) {
    if (fds[index].revents == 0) continue;
    RemoteAgent::Stream& stream = *streams[index - 1];
    RemoteAgent* owner = nullptr;
    for (auto& agent : agents_) {
      if (&agent->out == &stream || &agent->err == &stream) owner = agent.get();
    }
    ssize_t got = read(stream.fd.get(), buffer, sizeof buffer);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    const auto sink = console_sink(stream, owner->host);
    if (got <= 0) {
      stream.splitter.finish(sink);
      stream.fd.reset();
      continue;
    }
    stream.splitter.feed(std::string_view(buffer, static_cast<std::size_t>(got)), now, sink);
  }
}

void HostsLaunch::release_held_pieces(Clock::time_point now) {
  for (auto& agent : agents_) {
    for (RemoteAgent::Stream* stream : {&agent->out, &agent->err}) {
      const auto due = stream->splitter.deadline();
      if (due && now >= *due) stream->splitter.on_time(now, console_sink(*stream, agent->host));
    }
  }
}

void HostsLaunch::handle_agent_exits(Clock::time_point now) {
  for (std::size_t index = 0; index < agents_.size(); ++index) {
    RemoteAgent& agent = *agents_[index];
    if (!agent.alive) continue;
    const std::optional<ExitStatus> exited = collect_exit(agent.pid, guard_);
    if (!exited) continue;
    const ExitStatus& status = *exited;
    agent.alive = false;
    agent.status = status;
    agent.ended = now;
    agent.stdin_pipe.reset();
    const bool bad = !status.success() && !(!status.signaled && status.value == exit_code::kStoppedAfterCheckpoint);
    if (bad && !first_failure_ && !launcher_signal_) {
      const double grace = launch_.grace_period;
      first_failure_ = index;
      settle_deadline_ = now + seconds(grace + kSettleMarginS);
      say(fmt::format("the agent on {} ended with {}; the others should follow within seconds (stopped in {:.0f} s "
                      "otherwise)", agent.host, status.describe(), grace + kSettleMarginS));
    }
  }
}

void HostsLaunch::handle_signals(Clock::time_point now) {
  for (int signal : signals_.take_pending()) {
    if (signal == SIGCHLD) {
      handle_agent_exits(now);
    } else if (stops_the_job(signal)) {
      if (launcher_signal_) {
        kill_all(SIGKILL);  // the second Ctrl-C
      } else {
        launcher_signal_ = signal;
        say("got " + signal_name(signal) + ": stopping every node agent");
        stop_all(signal, now);
      }
    } else {
      kill_all(signal);  // SIGUSR1/SIGUSR2: the agents forward them to their workers
    }
  }
}

void HostsLaunch::handle_deadlines(Clock::time_point now) {
  if (settle_deadline_ && now >= *settle_deadline_) {
    settle_deadline_.reset();
    bool any = false;
    for (auto& agent : agents_) any = any || agent->alive;
    if (any) {
      say("stopping the node agents that are still running");
      stop_all(SIGTERM, now);
    }
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    kill_all(SIGKILL);
  }
}

// The last partial lines of streams still open when the loop ended.
void HostsLaunch::drain_streams() {
  for (auto& agent : agents_) {
    for (RemoteAgent::Stream* stream : {&agent->out, &agent->err}) {
      if (stream->fd) {
        stream->splitter.finish(console_sink(*stream, agent->host));
        stream->fd.reset();
      }
    }
  }
}

int HostsLaunch::exit_code() {
  int code = 0;
  if (launcher_signal_) {
    code = 128 + *launcher_signal_;
    say(fmt::format("stopped by {}; every node agent has exited (exit code {})", signal_name(*launcher_signal_), code));
  } else if (first_failure_) {
    code = agents_[*first_failure_]->status->as_exit_code();
    say(fmt::format("job failed on {} host{} (exit code {}; each agent's report is above, its files in its "
                    "node_<rank> directory)", agents_.size(), agents_.size() == 1 ? "" : "s", code));
  } else {
    for (auto& agent : agents_) {
      if (agent->status && agent->status->value == exit_code::kStoppedAfterCheckpoint) code = exit_code::kStoppedAfterCheckpoint;
    }
  }
  return code;
}

int HostsLaunch::run() {
  std::vector<pollfd> fds;
  std::vector<RemoteAgent::Stream*> streams;
  while (still_running(Clock::now())) {
    const std::optional<Clock::time_point> wake = next_deadline();
    fds.clear();
    streams.clear();
    fds.push_back(pollfd{signals_.fd(), POLLIN, 0});
    for (auto& agent : agents_) {
      for (RemoteAgent::Stream* stream : {&agent->out, &agent->err}) {
        if (!stream->fd) continue;
        fds.push_back(pollfd{stream->fd.get(), POLLIN, 0});
        streams.push_back(stream);
      }
    }
    timespec timeout{};
    if (wake) timeout = to_timespec(*wake - Clock::now());
    int ready = ppoll(fds.data(), fds.size(), wake ? &timeout : nullptr, nullptr);
    if (ready < 0 && errno != EINTR) throw SystemError("ppoll() in the hosts launcher", errno);
    const Clock::time_point now = Clock::now();
    if (ready > 0) pump_streams(fds, streams, now);
    release_held_pieces(now);
    if (ready > 0 && fds[0].revents != 0) handle_signals(now);
    handle_deadlines(now);
    console_.flush();
  }
  drain_streams();
  close_stdin_pipes();
  const int code = exit_code();
  console_.flush();
  return code;
}

}  // namespace

int run_hosts_launch(const LaunchRequest& request, const LoadedConfig& loaded, const LaunchEnvironment& outside) {
  const EnvMap environment = outside.environment ? *outside.environment : current_environment();
  const std::vector<HostSlots> hosts = hosts_of(loaded.config.launch);
  const std::vector<std::vector<std::string>> arguments = agent_launch_arguments(hosts, request, loaded, environment);
  HostsLaunch launch(loaded.config.launch, outside);
  launch.start_agents(hosts, arguments, environment);
  return launch.run();
}

}  // namespace mgtrain
