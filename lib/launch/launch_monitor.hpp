// The launcher's monitoring inside the supervisor's event loop (a LoopParticipant): takes resource samples at
// log.resource_interval_s (resources.jsonl), reads the ranks' progress files for straggler detection
// (observe/straggler_detector.hpp: a console warning per episode, the ranks' step rates and flags in the
// status snapshot, episodes to run.json), publishes the status snapshot to the status server whenever
// the workers change or a sample was taken, and carries out the server's POST commands in the loop:
// /checkpoint = SIGUSR2 to every worker's group, /stop = as if the launcher got SIGUSR1. POST /stacks goes to the
// node's dumping room (rank_diagnostics.hpp), which dumps on the loop while the HTTP thread waits for the answer.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "launch/rank_diagnostics.hpp"
#include "multinode/stacks_across_nodes.hpp"
#include "observe/resource_sampler.hpp"
#include "observe/run_record.hpp"
#include "observe/status_server.hpp"
#include "observe/straggler_detector.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/supervisor.hpp"
#include "wire/node_status.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain {

// Receives every straggler episode of the launch so far (for run.json) whenever one starts or ends.
using StragglerEpisodesSink = std::function<void(std::vector<StragglerRecord>)>;
// One node: receives where each attempt started so far (for run.json's "resumes") whenever one more is known.
using ResumesSink = std::function<void(std::vector<ResumeRecord>)>;
// What the monitor hands to run.json (each may be empty).
struct RunRecordSinks {
  StragglerEpisodesSink episodes;
  ResumesSink resumes;
};

// A node of a multi-node job, as its node agent lets monitoring see the job (docs/monitoring.md#several-nodes): this
// node's ranks go to the job's host when a rank's process changes and every kJobReportInterval for the figures; on
// the host, every other node's latest report joins the status API.
struct JobStatusLink {
  std::function<void(rdzv::NodeStatus)> report;          // this node's ranks, to the job's host
  std::function<std::vector<rdzv::NodeStatus>()> nodes;  // on the host: every member's latest report; else empty
  std::function<bool()> hosts;                           // whether this node hosts the rendezvous (the job's view)
  std::function<std::string()> job_status_host;          // where the job-wide view is served (the rendezvous)
  std::function<void()> tick;                            // called every kJobCheckInterval (may be empty)
  // On the host: the newest completed recovery and the round it followed (may be empty).
  std::function<std::optional<std::pair<int, RoundEntry::Recovery>>()> last_recovery;
  // Stacks on demand across nodes (multinode/stacks_across_nodes.hpp; each may be empty): how this node's agent has
  // its ranks dumped when the job's host asks, and on the host how a job-wide POST /stacks asks every node and
  // gathers their answers.
  using NodeStacksDumper = std::function<void(double timeout_s, std::function<void(rdzv::NodeStacks)> answer)>;
  std::function<void(NodeStacksDumper)> serve_stacks;
  std::function<std::optional<rdzv::StacksRefusal>(double timeout_s)> start_job_stacks;
  std::function<std::optional<rdzv::JobStacks>()> take_job_stacks;
};

class LaunchMonitor final : public LoopParticipant {
 public:
  // `server` and `gpus` may be null; resource_interval_s 0 writes no resources.jsonl; `stragglers` nullopt:
  // no straggler detection (`sinks`' members may be empty).
  LaunchMonitor(Supervisor& supervisor, const LaunchPlan& plan, StatusServer* server, GpuStatsSource* gpus,
                double resource_interval_s, std::optional<StragglerSettings> stragglers = std::nullopt,
                RunRecordSinks sinks = {}, std::optional<JobStatusLink> job = std::nullopt);

  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, std::chrono::steady_clock::time_point now) override;
  // The next sample, until the supervisor has finished (then only what wakes the loop anyway).
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const override;
  void on_time(std::chrono::steady_clock::time_point now) override;
  void publish();  // hands the current state to the status server now
  // One node: where each attempt started, once rank 0's progress file says, to run.json (`last`: the launch is over,
  // the current attempt is not waited for).
  void note_resumes(bool last);
  // The state now: with `job_view` on the job's host every node's ranks (what it publishes), else this node's.
  StatusSnapshot snapshot(bool job_view) const;
  // A node of a multi-node job that does not host the rendezvous: its status_token and status_endpoint go into its
  // node folder once its first round has started.
  void write_status_files_when_started(std::string token) { node_view_token_ = std::move(token); }

 private:
  void refresh_ranks();                                           // from the supervisor's workers
  void read_progress(std::chrono::steady_clock::time_point now);  // straggler detection: files, flags, messages
  std::vector<StragglerRecord> straggler_records() const;
  // Several nodes: this node's ranks to the host when they changed or the figures are due; on the host, a new
  // snapshot when another node's ranks changed.
  void exchange_job_status(std::chrono::steady_clock::time_point now);
  // This node's `ranks` of `round`, heartbeats read now.
  rdzv::NodeStatus node_status(const std::vector<RankStatus>& ranks, int round) const;
  std::vector<RankStatus> other_nodes() const;  // on the host: the other nodes' ranks as last reported
  void observe_other_nodes(std::chrono::steady_clock::time_point now);  // the host's straggler detection
  bool still_judged(int rank, pid_t pid, bool running, std::chrono::steady_clock::time_point now);
  void observe_progress(int rank, pid_t pid, std::pair<int, std::string> node,
                        std::chrono::steady_clock::time_point written, const ProgressReport& report);
  std::string with_node(std::string text, int rank) const;  // "rank 3 (node 1, hostB) ..."

  Supervisor& supervisor_;
  StatusServer* server_;
  ResourceSampler sampler_;
  std::chrono::steady_clock::duration row_interval_{};
  std::chrono::steady_clock::duration sample_interval_{};
  std::optional<std::chrono::steady_clock::time_point> next_row_;
  std::optional<std::chrono::steady_clock::time_point> next_sample_;
  std::vector<RankStatus> ranks_;
  int ranks_attempt_ = -1;  // the attempt (a node agent's round) of ranks_
  std::string published_signature_;
  double start_time_ = 0;
  std::string driver_version_;
  std::optional<StragglerDetector> stragglers_;
  StragglerEpisodesSink on_episodes_;
  ResumesSink on_resumes_;
  std::vector<ResumeRecord> resumes_;
  int resume_noted_attempt_ = -1;  // the newest attempt whose start rank 0's progress file said
  std::chrono::steady_clock::duration progress_interval_{};
  std::optional<std::chrono::steady_clock::time_point> next_progress_;
  int progress_attempt_ = -1;           // the attempt whose ranks the detector judges
  std::map<int, pid_t> progress_pids_;  // rank -> the worker process its readings came from
  std::vector<int> episode_attempts_;   // the attempt of each of the detector's episodes
  std::optional<JobStatusLink> job_;
  std::optional<std::chrono::steady_clock::time_point> next_job_check_;
  std::chrono::steady_clock::time_point last_report_{};
  std::string reported_signature_;                         // this node's ranks as last reported
  std::string remote_signature_;                           // the other nodes' ranks as last published (host)
  std::map<int, std::pair<int, std::string>> rank_nodes_;  // rank -> its node rank and host, as last judged
  std::string node_view_token_;                            // write_status_files_when_started, until written
};

// Everything monitoring needs for one single-node launch, in the order that keeps it safe: called after
// the supervisor blocked its signals (threads started later inherit the mask, so signals still reach the
// loop's signalfd) and before any worker starts. Opens NVML (a GPU health line on the message stream when
// present), samples resources at log.resource_interval_s, and with launch.status_port binds the status
// server (UsageError naming the port when it cannot), writes <run dir>/status_token (0600) and
// <run dir>/status_endpoint, and joins the supervisor's loop.
class LaunchMonitoring {
 public:
  // `sinks` get the straggler episodes and the attempts' starts for run.json (each may be empty). POST /stacks goes to
  // `dumps` (the node's RankDiagnostics, on the supervisor's loop), which outlives this object.
  LaunchMonitoring(Supervisor& supervisor, const LaunchPlan& plan, const Config& config, RankDiagnostics& dumps,
                   RunRecordSinks sinks = {}, std::optional<JobStatusLink> job = std::nullopt);
  ~LaunchMonitoring();
  // Hands the last of what run.json gets from monitoring to its sinks (the last attempt's start): once the
  // supervisor's run has returned, before the record is finished.
  void flush_records();
  LaunchMonitoring(const LaunchMonitoring&) = delete;
  LaunchMonitoring& operator=(const LaunchMonitoring&) = delete;

 private:
  Supervisor& supervisor_;
  RankDiagnostics& dumps_;
  std::unique_ptr<GpuStatsSource> gpus_;
  std::unique_ptr<StatusServer> server_;
  std::unique_ptr<LaunchMonitor> monitor_;
  std::function<void(JobStatusLink::NodeStacksDumper)> serve_stacks_;  // undone when this goes
};

// The straggler settings when detection runs for this launch: launch.straggler_detection on, at least two ranks to
// compare (this node's; `job_wide`: the whole job's, judged on the node that hosts the rendezvous), and progress files
// given to the workers (the same rule as supervise/worker_env.cpp: a heartbeat timeout or the status API); else
// nullopt. Throws UsageError for settings the detector refuses.
std::optional<StragglerSettings> straggler_settings(const LaunchPlan& plan, const LaunchConfig& launch,
                                                    bool job_wide = false);

// "mgtrain: GPUs (NVML): 2 x NVIDIA H100 80GB HBM3 (79.6 GiB), driver 550.54.15" ("" without GPUs).
std::string gpu_health_line(const std::vector<GpuSample>& gpus, const std::string& driver_version);

}  // namespace mgtrain
