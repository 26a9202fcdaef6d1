// Scale benchmark of the rendezvous server (scripts/bench/rendezvous_scale.sh; docs/PERFORMANCE.md): one
// process, the real RendezvousServer in its own thread with its own ppoll loop (as in the hosting agent) and
// N simulated agents (real RendezvousClients over loopback TCP) in the main thread, in one epoll set so that
// the agents' side costs what is ready, not every agent at each wake-up (both share the machine's cores; the
// server thread's CPU is reported per phase). Measures: all N joined
// and assigned; the server thread's CPU while only heartbeats flow (agents answer the server's heartbeats as
// RendezvousLink does); one worker failure broadcast as stop orders, every node's end, the finish to all;
// teardown until the server is quiescent. Prints one JSON line.
// Usage: rendezvous_scale_bench [agents=10000] [heartbeat interval s=5] [steady window s=2*interval]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "config/config.hpp"
#include "host/port_probe.hpp"
#include "multinode/job_fingerprint.hpp"
#include "multinode/rendezvous_client.hpp"
#include "multinode/rendezvous_server.hpp"
#include "wire/node_status.hpp"
#include "wire/tcp_socket.hpp"

using namespace mgtrain;
using Clock = std::chrono::steady_clock;

namespace {

struct FixedPort : PortProbe {
  int pick_free_port() override { return 29500; }
  bool is_free(int) override { return true; }
};

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double thread_cpu_s(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

timespec to_timespec(Clock::duration duration) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
  if (ns < 0) ns = 0;
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

struct Agent {
  std::unique_ptr<RendezvousClient> client;
  int watched_fd = -1;  // in the agents' epoll set, with watched_events
  std::uint32_t watched_events = 0;
  bool assigned = false;
  bool finished = false;
  int round = -1;
  Clock::time_point next_report{};  // its next node-status report (status reports on)
};

}  // namespace

int main(int argc, char** argv) {
  const int agents = argc > 1 ? std::atoi(argv[1]) : 10000;
  const double interval = argc > 2 ? std::atof(argv[2]) : 5.0;
  const double steady_s = argc > 3 ? std::atof(argv[3]) : 2 * interval;
  if (agents < 2 || interval <= 0 || steady_s <= 0) {
    std::fprintf(stderr, "usage: %s [agents>=2] [heartbeat interval s] [steady window s]\n", argv[0]);
    return 2;
  }
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  const rlim_t wanted = static_cast<rlim_t>(2 * agents + 64);
  if (files.rlim_max != RLIM_INFINITY && files.rlim_max < wanted) {
    rlimit raised{wanted, wanted};  // root (CAP_SYS_RESOURCE) may go above the hard limit
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
  }
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < static_cast<rlim_t>(2 * agents + 64)) {
    std::fprintf(stderr, "RLIMIT_NOFILE %llu is too low for %d agents (2 fds each)\n",
                 static_cast<unsigned long long>(files.rlim_cur), agents);
    return 1;
  }

  std::string error;
  std::vector<SocketAddress> addresses = resolve_tcp("127.0.0.1", 0, error);
  Fd listener = addresses.empty() ? Fd() : listen_on(addresses.front());
  if (!listener) {
    std::perror("listen");
    return 1;
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  const int port = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  rdzv::RoundsSettings settings;
  settings.min_nodes = settings.max_nodes = agents;
  settings.join_timeout_s = 600;
  settings.node_timeout_s = std::max(30.0, 6 * interval);
  settings.heartbeat_interval_s = interval;
  settings.master_addr = "127.0.0.1";
  settings.host_agent_id = "bench:0";
  FixedPort ports;
  // MGTRAIN_RDZV_TOKEN set: every frame authenticated (docs/multinode.md#the-rendezvous-token).
  const char* secret = std::getenv("MGTRAIN_RDZV_TOKEN");
  const rdzv::RendezvousToken token{secret ? secret : "", "MGTRAIN_RDZV_TOKEN"};
  std::printf("authentication: %s\n", token.set() ? "HMAC-SHA256 (MGTRAIN_RDZV_TOKEN)" : "none");
  // MGTRAIN_BENCH_STATUS_RANKS=N: every agent also reports a node status of N ranks every 2 s (the job-wide status
  // API's node-status, as node agents send it: docs/monitoring.md#several-nodes), staggered over the interval.
  const char* status_ranks_text = std::getenv("MGTRAIN_BENCH_STATUS_RANKS");
  const int status_ranks = status_ranks_text ? std::atoi(status_ranks_text) : 0;
  const auto report_interval = std::chrono::seconds(2);
  std::printf("node-status reports: %s\n",
              status_ranks > 0 ? fmt::format("{} ranks per node every 2 s", status_ranks).c_str() : "none");
  long reports_sent = 0, steady_reports_start = 0, steady_reports = 0;
  auto report_of = [&](int rank, int round) {
    rdzv::NodeStatus status;
    status.round = round;
    status.node_rank = rank;
    status.host = fmt::format("host{}", rank);
    for (int local = 0; local < status_ranks; ++local) {
      rdzv::RankRow row;
      row.rank = rank * status_ranks + local;
      row.local_rank = local;
      row.pid = 100000 + local;
      row.state = "running";
      row.step = 123456;
      row.loss = 0.123456789;
      row.beat_time = 1795991863.2045678;
      row.cpu_percent = 99.5;
      row.rss_bytes = 1LL << 31;
      row.step_rate = 12.345;
      row.progress_time = 1795991863.2045678;
      row.busy = 1234.5678;
      row.start_step = 120000;
      status.ranks.push_back(row);
    }
    return status.to_message();
  };
  RendezvousServer server(std::move(listener), settings, ports, nullptr, Clock::now(), token);

  // ---- the server thread: the hosting agent's loop, reduced to the server ----
  Fd stop(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  std::atomic<bool> quiescent{false};
  std::atomic<long> server_wakeups{0};
  std::atomic<double> quiescent_at{0};
  const auto start = Clock::now();
  std::thread server_thread([&] {
    std::vector<pollfd> fds;
    while (true) {
      Clock::time_point now = Clock::now();
      fds.clear();
      fds.push_back(pollfd{stop.get(), POLLIN, 0});
      server.add_fds(fds);
      std::optional<Clock::time_point> wake = server.next_deadline();
      timespec timeout{};
      if (wake) timeout = to_timespec(*wake - now);
      int ready = ppoll(fds.data(), fds.size(), wake ? &timeout : nullptr, nullptr);
      ++server_wakeups;
      now = Clock::now();
      if (ready > 0 && fds[0].revents != 0) break;
      if (ready > 0 && fds[1].revents != 0) server.on_ready(fds[1], now);
      server.on_time(now);
      if (server.finished() && server.quiescent(now) && !quiescent) {
        quiescent_at = since(start);
        quiescent = true;
      }
    }
  });
  clockid_t server_clock;
  pthread_getcpuclockid(server_thread.native_handle(), &server_clock);

  // ---- the agents ----
  const JobFingerprint fingerprint = job_fingerprint(Config{});
  auto join_of = [&](int rank) {
    rdzv::JoinRequest join;
    join.version = "bench";
    join.node_rank = rank;
    join.hostname = fmt::format("host{}", rank);
    join.agent_id = rank == 0 ? "bench:0" : fmt::format("host{}:1", rank);
    join.nproc = 1;
    join.nnodes = std::to_string(agents);
    join.run_id = "bench";
    join.config_hash = fingerprint.hash;
    join.config_lines = fingerprint.lines;
    return join.to_message();
  };
  std::vector<Agent> nodes(agents);
  int created = 0, assigned = 0, finished = 0, connecting = 0;
  long heartbeats_received = 0, heartbeats_sent = 0;
  std::vector<rdzv::Message> messages;
  enum class Phase { kJoining, kSteady, kFailing, kDone } phase = Phase::kJoining;
  double joined_at = 0, steady_cpu = 0, steady_wall = 0, failed_at = 0, all_finished_at = 0;
  double steady_cpu_start = 0, join_cpu = 0, failed_cpu = 0, agents_cpu_join = 0;
  long steady_wakeups_start = 0, steady_wakeups = 0, steady_heartbeats = 0, steady_heartbeats_start = 0;
  Clock::time_point steady_start;
  const auto hard_limit = start + std::chrono::seconds(120) +
                          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(steady_s));
  const auto beat = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval));
  const auto half_beat = beat / 2;
  // The simulated agents' loop: one epoll set (the agents must not cost O(agents) per wake-up, or they, not
  // the server, make the wall time), plus a tick every 20 ms for connecting, retries and their own heartbeats.
  Fd agents_epoll(epoll_create1(EPOLL_CLOEXEC));
  std::vector<pollfd> single;
  auto sync = [&](int index) {  // (re)register the agent's socket with the events it waits for
    Agent& agent = nodes[index];
    single.clear();
    agent.client->add_fds(single);
    if (single.empty()) {
      agent.watched_fd = -1;  // closed: the kernel dropped it from the set
      return;
    }
    std::uint32_t events =
        ((single[0].events & POLLIN) ? EPOLLIN : 0u) | ((single[0].events & POLLOUT) ? EPOLLOUT : 0u);
    if (single[0].fd == agent.watched_fd && events == agent.watched_events) return;
    epoll_event event{};
    event.events = events;
    event.data.u32 = static_cast<std::uint32_t>(index);
    int operation = single[0].fd == agent.watched_fd ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(agents_epoll.get(), operation, single[0].fd, &event) != 0) {  // a number reused after a close
      epoll_ctl(agents_epoll.get(), errno == EEXIST ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, single[0].fd, &event);
    }
    agent.watched_fd = single[0].fd;
    agent.watched_events = events;
  };
  auto handle = [&](int rank, Clock::time_point now) {
    Agent& agent = nodes[rank];
    if (agent.client->take_connected_event()) agent.client->send(join_of(rank));
    for (const rdzv::Message& message : messages) {
      switch (message.type) {
        case rdzv::MessageType::kAssign:
          agent.assigned = true;
          agent.round = static_cast<int>(message.integer("round"));
          ++assigned;
          break;
        case rdzv::MessageType::kHeartbeat:  // answered at once, as RendezvousLink does
          ++heartbeats_received;
          if (now - agent.client->last_sent() >= half_beat) {
            agent.client->send(rdzv::heartbeat_message());
            ++heartbeats_sent;
          }
          break;
        case rdzv::MessageType::kStop:
          agent.client->send(rdzv::workers_ended_message(agent.round, rdzv::kEndedStopped, 0));
          break;
        case rdzv::MessageType::kFinish:
        case rdzv::MessageType::kReject:
          if (!agent.finished) {
            agent.finished = true;
            ++finished;
            agent.client->close();
          }
          break;
        default:
          break;
      }
    }
  };
  std::vector<epoll_event> events(1024);
  Clock::time_point next_tick = Clock::now();
  while (phase != Phase::kDone) {
    Clock::time_point now = Clock::now();
    if (now > hard_limit) {
      std::fprintf(stderr, "bench: gave up (phase %d, %d assigned, %d finished)\n", static_cast<int>(phase), assigned,
                   finished);
      return 1;
    }
    // Connect in batches: more than the listen backlog at once would wait for SYN retransmits.
    while (created < agents && connecting < 512) {
      nodes[created].client =
          std::make_unique<RendezvousClient>("127.0.0.1", port, now + std::chrono::seconds(60), now, token);
      sync(created);
      ++created;
      ++connecting;
    }
    if (now >= next_tick) {
      next_tick = now + std::chrono::milliseconds(20);
      for (int index = 0; index < created; ++index) {
        Agent& agent = nodes[index];
        if (agent.finished) continue;
        bool was_connecting = agent.client->state() == RendezvousClient::State::kConnecting;
        agent.client->on_time(now);
        if (was_connecting && agent.client->state() != RendezvousClient::State::kConnecting) --connecting;
        if (agent.client->state() == RendezvousClient::State::kUnreachable) {
          std::fprintf(stderr, "bench: agent %d could not connect: %s\n", index, agent.client->problem().c_str());
          return 1;
        }
        if (agent.client->state() == RendezvousClient::State::kConnected && now - agent.client->last_sent() >= beat) {
          agent.client->send(rdzv::heartbeat_message());
          ++heartbeats_sent;
        }
        if (status_ranks > 0 && agent.assigned && agent.client->state() == RendezvousClient::State::kConnected &&
            phase == Phase::kSteady && now >= agent.next_report) {
          agent.client->send_report(report_of(index, agent.round));
          agent.next_report += report_interval;
          ++reports_sent;
        }
        if (was_connecting || agent.client->has_output()) sync(index);
      }
    }
    int timeout_ms =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - Clock::now()).count());
    int ready = epoll_wait(agents_epoll.get(), events.data(), static_cast<int>(events.size()), std::max(timeout_ms, 0));
    now = Clock::now();
    for (int slot = 0; slot < ready; ++slot) {
      const int rank = static_cast<int>(events[slot].data.u32);
      Agent& agent = nodes[rank];
      pollfd polled{agent.watched_fd, 0, 0};
      polled.revents = static_cast<short>(
          ((events[slot].events & EPOLLIN) ? POLLIN : 0) | ((events[slot].events & EPOLLOUT) ? POLLOUT : 0) |
          ((events[slot].events & EPOLLHUP) ? POLLHUP : 0) | ((events[slot].events & EPOLLERR) ? POLLERR : 0));
      agent.client->add_fds(single);  // the client serves only what add_fds reported
      single.clear();
      bool was_connecting = agent.client->state() == RendezvousClient::State::kConnecting;
      agent.client->on_ready(polled, now);
      messages = agent.client->take_messages();
      if (was_connecting && agent.client->state() != RendezvousClient::State::kConnecting) --connecting;
      handle(rank, now);
      sync(rank);
    }
    switch (phase) {
      case Phase::kJoining:
        if (assigned == agents) {
          joined_at = since(start);
          join_cpu = thread_cpu_s(server_clock);
          agents_cpu_join = thread_cpu_s(CLOCK_THREAD_CPUTIME_ID);
          phase = Phase::kSteady;
          steady_start = Clock::now();
          steady_cpu_start = thread_cpu_s(server_clock);
          steady_wakeups_start = server_wakeups;
          steady_heartbeats_start = heartbeats_received;
          steady_reports_start = reports_sent;
          for (int index = 0; index < agents; ++index) {  // the reports spread evenly over their interval
            nodes[index].next_report = steady_start + report_interval * index / agents;
          }
        }
        break;
      case Phase::kSteady:
        if (since(steady_start) >= steady_s) {
          steady_wall = since(steady_start);
          steady_cpu = thread_cpu_s(server_clock) - steady_cpu_start;
          steady_wakeups = server_wakeups - steady_wakeups_start;
          steady_heartbeats = heartbeats_received - steady_heartbeats_start;
          steady_reports = reports_sent - steady_reports_start;
          // Rank 1's worker fails: the server stops every other node, each reports its end, all get the finish.
          rdzv::NodeFailure failure;
          failure.round = nodes[1].round;
          failure.node_rank = 1;
          failure.global_rank = 1;
          failure.local_rank = 0;
          failure.exit_code = 3;
          failure.outcome = "exit code 3";
          failure.host = "host1";
          failed_cpu = thread_cpu_s(server_clock);
          nodes[1].client->send(rdzv::workers_failed_message(failure));
          nodes[1].client->send(rdzv::workers_ended_message(nodes[1].round, rdzv::kEndedFailed, 3));
          sync(1);
          failed_at = since(start);
          phase = Phase::kFailing;
        }
        break;
      case Phase::kFailing:
        if (finished == agents) {
          all_finished_at = since(start);
          phase = Phase::kDone;
        }
        break;
      case Phase::kDone:
        break;
    }
  }
  while (!quiescent && since(start) < all_finished_at + 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double total_cpu = thread_cpu_s(server_clock);
  const double agents_cpu_total = thread_cpu_s(CLOCK_THREAD_CPUTIME_ID);
  std::uint64_t one = 1;
  ssize_t ignored = write(stop.get(), &one, sizeof one);
  (void)ignored;
  server_thread.join();
  if (!quiescent) {
    std::fprintf(stderr, "bench: the server did not become quiescent\n");
    return 1;
  }
  const double release_s = quiescent_at - failed_at;
  std::printf(
      "{\"agents\": %d, \"join_s\": %.3f, \"heartbeat_interval_s\": %g, \"steady_window_s\": %.2f, "
      "\"steady_server_cpu_s\": %.4f, \"steady_server_core_fraction\": %.4f, \"steady_server_wakeups\": %ld, "
      "\"steady_heartbeats_to_agents\": %ld, \"failure_to_all_finished_s\": %.3f, \"release_s\": %.3f, "
      "\"join_and_release_s\": %.3f, \"server_cpu_total_s\": %.3f, \"server_cpu_join_s\": %.3f, "
      "\"server_cpu_release_s\": %.3f, \"agents_cpu_join_s\": %.3f, \"agents_cpu_total_s\": %.3f, "
      "\"status_ranks_per_node\": %d, \"steady_status_reports\": %ld, \"status_reports_per_node_per_s\": %.3f, "
      "\"status_reports_per_s\": %.1f}\n",
      agents, joined_at, interval, steady_wall, steady_cpu, steady_cpu / steady_wall, steady_wakeups, steady_heartbeats,
      all_finished_at - failed_at, release_s, joined_at + release_s, total_cpu, join_cpu, total_cpu - failed_cpu,
      agents_cpu_join, agents_cpu_total, status_ranks, steady_reports,
      steady_wall > 0 ? steady_reports / steady_wall / agents : 0.0,
      steady_wall > 0 ? steady_reports / steady_wall : 0.0);
  return 0;
}
