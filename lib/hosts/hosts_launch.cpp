// One command for many hosts: start, stream and stop one node agent per host (see hosts_launch.hpp),
// on the event loop (process/event_loop.hpp), with hosts_policy.hpp's decisions and hosts_console.hpp's console.
#include "hosts/hosts_launch.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "contract/worker_binary.hpp"
#include "hosts/hosts_console.hpp"
#include "hosts/hosts_policy.hpp"
#include "output/console_writer.hpp"
#include "output/live_line_splitter.hpp"
#include "process/event_loop.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/fd.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

struct RemoteAgent {
  std::string host;
  pid_t pid = -1;
  Fd stdin_pipe;  // write end: closing it tells an --exit-with-stdin agent to stop
};

// One stream of an agent: its lines on the console behind "[host] " (merged across hosts when deduplication is on),
// unfinished ones ('\r' updates) live too.
class PrefixedOutput final : public ChildOutput {
 public:
  PrefixedOutput(Fd source, bool is_stderr, const std::string& host, HostsConsole& console)
      : source_(std::move(source)), is_stderr_(is_stderr), prefix_("[" + host + "] "), console_(console) {}
  void add_fds(std::vector<pollfd>& fds) override {
    if (source_) fds.push_back(pollfd{source_.get(), POLLIN, 0});
  }
  void on_ready(const pollfd&, LoopTime now) override {
    char buffer[65536];
    const ssize_t got = read(source_.get(), buffer, sizeof buffer);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got <= 0) return close_now();
    splitter_.feed(std::string_view(buffer, static_cast<std::size_t>(got)), now, sink(now));
  }
  std::optional<LoopTime> next_deadline() const override { return splitter_.deadline(); }
  void on_time(LoopTime now) override {
    const auto due = splitter_.deadline();
    if (due && now >= *due) splitter_.on_time(now, sink(now));
  }
  bool open() const override { return source_.valid(); }
  void close_now() override {
    splitter_.finish(sink(Clock::now()));
    source_.reset();
  }

 private:
  LiveLineSplitter::PieceSink sink(LoopTime now) {
    return [this, now](const LiveLineSplitter::Piece& piece) {
      console_.add_piece(is_stderr_, this, prefix_, piece, now);
    };
  }

  Fd source_;
  bool is_stderr_;
  std::string prefix_;
  HostsConsole& console_;
  LiveLineSplitter splitter_;
};

// One node agent per host as the loop's children: their output prefixed with the host, signals passed on,
// the others stopped after the first failure, the job's exit code at the end.
class HostsLaunch final : private LoopHandler, private LoopParticipant {
 public:
  HostsLaunch(const LaunchConfig& launch, int stdout_fd, int stderr_fd, bool dedup, const JobRanks& ranks,
              Clock::duration dedup_window)
      : launch_(launch), console_(stdout_fd, stderr_fd), lines_(console_, dedup, ranks, dedup_window), loop_(*this) {}

  void start_agents(const std::vector<HostSlots>& hosts, const std::vector<std::vector<std::string>>& arguments,
                    const EnvMap& environment, const rdzv::RendezvousToken& token);
  int run();

 private:
  void say(const std::string& line) {
    lines_.release_all();  // the agents' held lines came first
    console_.message(log::Level::Info, "{}", line);
  }
  void close_stdin_pipes();
  void carry_out(const HostsOrder& order);
  int exit_code();

  // LoopHandler
  void on_child_exits(const std::vector<ChildExit>& exits, Clock::time_point now) override;
  void on_signal(int signal, Clock::time_point now) override { carry_out(policy_->on_signal(signal, now)); }
  // LoopParticipant: the policy's deadlines and the held lines', and the console flushed after every wake-up.
  std::optional<Clock::time_point> next_deadline() const override {
    std::optional<Clock::time_point> wake = policy_->next_deadline();
    keep_earliest(wake, lines_.deadline());
    return wake;
  }
  void on_time(Clock::time_point now) override {
    carry_out(policy_->on_time(now));
    lines_.release_due(now);
    console_.flush();
  }

  const LaunchConfig& launch_;
  ConsoleWriter console_;
  HostsConsole lines_;  // the agents' lines on console_
  EventLoop loop_;      // after them: the agents' output shows on it
  std::vector<RemoteAgent> agents_;
  std::optional<HostsPolicy> policy_;  // once the agents are started
};

void HostsLaunch::close_stdin_pipes() {
  for (RemoteAgent& agent : agents_) agent.stdin_pipe.reset();
}

void HostsLaunch::carry_out(const HostsOrder& order) {
  switch (order.action) {
    case HostsAction::kNone:
    case HostsAction::kWaitForOthers:  // worded by on_child_exits, which knows the agent and its status
      return;
    case HostsAction::kStopOnSignal:
      say("got " + signal_name(order.signal) + ": stopping every node agent");
      loop_.signal_children(order.signal);
      close_stdin_pipes();
      return;
    case HostsAction::kStopStragglers:
      say("stopping the node agents that are still running");
      loop_.signal_children(order.signal);
      close_stdin_pipes();
      return;
    case HostsAction::kKillAll:
    case HostsAction::kForward:
      loop_.signal_children(order.signal);
      return;
  }
}

void HostsLaunch::start_agents(const std::vector<HostSlots>& hosts,
                               const std::vector<std::vector<std::string>>& arguments, const EnvMap& environment,
                               const rdzv::RendezvousToken& token) {
  const std::string mgtrain = executable_directory() + "/mgtrain";
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) throw SystemError("getcwd()", errno);
  const std::vector<std::string> environ_strings = to_environ_strings(environment);
  try {
    std::string started;
    for (std::size_t rank = 0; rank < hosts.size(); ++rank) {
      Pipe stdin_pipe = make_pipe();
      WorkerProcessSpec spec;
      spec.argv =
          remote_agent_argv(launch_.remote_shell, hosts[rank].host, agent_command_line(cwd, mgtrain, arguments[rank]));
      spec.environment = environ_strings;
      spec.stdin_fd = stdin_pipe.read.get();       // the child gets a copy
      spec.grouping = ProcessGrouping::kOwnGroup;  // in the launcher's session: ssh may still reach its terminal
      WorkerProcess process = loop_.start_child(std::move(spec));
      // A line of at most 4 KiB into an empty pipe: the write cannot block. It fails only when the agent is gone
      // already (EPIPE), which its exit status reports.
      const std::string line = token.secret + "\n";
      if (write(stdin_pipe.write.get(), line.data(), line.size()) < 0) {
        say("could not pass the rendezvous token to the agent on " + hosts[rank].host + ": " + std::strerror(errno));
      }
      agents_.push_back(RemoteAgent{hosts[rank].host, process.pid, std::move(stdin_pipe.write)});
      loop_.add_output(
          std::make_unique<PrefixedOutput>(std::move(process.stdout_pipe), false, hosts[rank].host, lines_));
      loop_.add_output(
          std::make_unique<PrefixedOutput>(std::move(process.stderr_pipe), true, hosts[rank].host, lines_));
      started += fmt::format("{}{} (node {}{})", rank ? ", " : "", hosts[rank].host, rank,
                             hosts[rank].slots ? fmt::format(", {} workers", hosts[rank].slots) : "");
    }
    say(fmt::format("started {} node agent{} through `{}`: {}", hosts.size(), hosts.size() == 1 ? "" : "s",
                    launch_.remote_shell, started));
  } catch (...) {
    loop_.kill_children();
    close_stdin_pipes();
    throw;
  }
  policy_.emplace(agents_.size(), launch_.grace_period);
}

void HostsLaunch::on_child_exits(const std::vector<ChildExit>& exits, Clock::time_point now) {
  for (const ChildExit& exit : exits) {
    for (std::size_t index = 0; index < agents_.size(); ++index) {
      RemoteAgent& agent = agents_[index];
      if (agent.pid != exit.pid) continue;
      agent.stdin_pipe.reset();
      const HostsOrder order = policy_->on_agent_exit(index, exit.status, now);
      if (order.action == HostsAction::kWaitForOthers) {
        say(
            fmt::format("the agent on {} ended with {}; the others should follow within seconds (stopped in {:.0f} s "
                        "otherwise)",
                        agent.host, exit.status.describe(), policy_->settle_seconds()));
      }
      carry_out(order);
    }
  }
}

int HostsLaunch::exit_code() {
  const int code = policy_->exit_code();
  if (policy_->launcher_signal()) {
    say(fmt::format("stopped by {}; every node agent has exited (exit code {})",
                    signal_name(*policy_->launcher_signal()), code));
  } else if (policy_->first_failure()) {
    say(
        fmt::format("job failed on {} host{} (exit code {}; each agent's report is above, its files in its "
                    "node_<rank> directory)",
                    agents_.size(), agents_.size() == 1 ? "" : "s", code));
  }
  return code;
}

int HostsLaunch::run() {
  loop_.add(*this);
  while (loop_.any_child_running() || !loop_.outputs_drained(Clock::now())) loop_.wait_once();
  loop_.remove(*this);
  close_stdin_pipes();
  lines_.release_all();
  const int code = exit_code();
  console_.flush();
  return code;
}

// The window of the cross-host deduplication: ConsoleDedup's, or the test seam's (hosts_launch.hpp).
ConsoleDedup::Clock::duration dedup_window(const EnvMap& environment) {
  const auto variable = environment.find(kHostsDedupWindowVariable);
  if (variable == environment.end() || variable->second.empty()) return ConsoleDedup::kWindow;
  const std::optional<std::uint64_t> ms = parse_digits(variable->second, 7);
  if (!ms) {
    throw UsageError(
        fmt::format("{}={}: not a number of milliseconds (0 to 9999999)", kHostsDedupWindowVariable, variable->second));
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(*ms));
}

}  // namespace

int run_hosts_launch(const LaunchRequest& request, const LoadedConfig& loaded, const EnvMap& environment, int stdout_fd,
                     int stderr_fd, const rdzv::RendezvousToken& token) {
  const std::vector<HostSlots> hosts = hosts_of(loaded.config.launch);
  const std::vector<std::vector<std::string>> arguments = agent_launch_arguments(hosts, request, loaded, environment);
  const JobRanks ranks = job_ranks(hosts, loaded.config.launch.nproc);
  const bool dedup = hosts_console_dedup_on(loaded.config.launch.console_dedup, request.config.personality, ranks);
  HostsLaunch launch(loaded.config.launch, stdout_fd, stderr_fd, dedup, ranks, dedup_window(environment));
  launch.start_agents(hosts, arguments, environment, token);
  return launch.run();
}

}  // namespace mgtrain
