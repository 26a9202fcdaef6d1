// Resource sampling, status snapshots and status commands in the supervisor's event loop (see launch_monitor.hpp).
#include "launch/launch_monitor.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>

#include "config/launch_defaults.hpp"
#include "contract/heartbeat_line.hpp"
#include "contract/log_layout.hpp"
#include "launch/job_record.hpp"
#include "observe/status_token.hpp"
#include "supervise/worker_env.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/file_io.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

// With the status server on, the dashboard's CPU/GPU figures are refreshed this often even when
// resources.jsonl gets rows more rarely (or none).
constexpr auto kStatusSampleInterval = std::chrono::seconds(2);

// Several nodes: how often a node looks whether its ranks changed (a rank that exited reaches the host within about
// this, plus the network), and how often it reports its figures (step, loss, CPU) when nothing changed. The host's
// load is one small message per node per kJobReportInterval: 500 a second for a job of 1,000 nodes.
constexpr auto kJobCheckInterval = std::chrono::milliseconds(500);
constexpr auto kJobReportInterval = std::chrono::seconds(2);

// What a rank's process is now, for telling a change from a figure: "rank:pid:state,...".
std::string ranks_signature(int attempt, const std::vector<RankStatus>& ranks) {
  std::string signature = std::to_string(attempt);
  for (const RankStatus& rank : ranks) {
    signature += "," + std::to_string(rank.rank) + ":" + std::to_string(rank.pid) + rank.state;
  }
  return signature;
}

// A steady time point as Unix seconds (for run.json), by its distance from now.
double unix_time_of(Clock::time_point when) {
  return unix_seconds_now() - std::chrono::duration<double>(Clock::now() - when).count();
}

// Progress files are read this often: a twentieth of the straggler window (1 s for the default 30 s), which
// keeps the error of when an advance is seen below 5 % of the window, between 0.1 s and 1 s.
Clock::duration progress_interval(double window_s) { return steady_seconds(std::clamp(window_s / 20, 0.1, 1.0)); }

// A rank's progress file read once: its text (the first 256 bytes: a heartbeat line or a decimal count) and when it was
// written (its modification time, so the launcher's own delays in reading do not blur the rates). `read` false: absent
// or unreadable.
struct ProgressFile {
  bool read = false;
  std::string text;
  std::chrono::system_clock::time_point modified;
};

ProgressFile read_progress_text(const std::string& path) {
  ProgressFile file;
  const Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat status {};
  if (!fd || fstat(fd.get(), &status) != 0) return file;
  char buffer[256];
  const ssize_t got = read(fd.get(), buffer, sizeof buffer);
  if (got <= 0) return file;
  file.read = true;
  file.text.assign(buffer, static_cast<std::size_t>(got));
  file.modified = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(status.st_mtim.tv_sec) + std::chrono::nanoseconds(status.st_mtim.tv_nsec)));
  return file;
}

// A wall-clock time as a steady one, by its distance from now; never later than `now`.
Clock::time_point steady_time_of(std::chrono::system_clock::time_point when, Clock::time_point now) {
  const auto age = std::chrono::system_clock::now() - when;
  if (age <= std::chrono::system_clock::duration::zero()) return now;
  return now - std::chrono::duration_cast<Clock::duration>(age);
}

double unix_seconds_of(std::chrono::system_clock::time_point when) {
  return std::chrono::duration<double>(when.time_since_epoch()).count();
}

std::chrono::system_clock::time_point system_time_of_unix(double seconds) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds)));
}

// <run dir>/status_token (0600) and <run dir>/status_endpoint, and the line that says where the API is.
void write_status_files(const std::string& run_dir, const std::string& token, const std::string& endpoint) {
  const std::string token_file = log_layout::status_token_file(run_dir);
  write_status_token_file(token_file, token);
  std::ofstream(log_layout::status_endpoint_file(run_dir), std::ios::trunc) << endpoint << "\n";
  log::info("status API and dashboard on http://{}/ (POST needs the token in {})", endpoint, token_file);
}

}  // namespace

LaunchMonitor::LaunchMonitor(Supervisor& supervisor, const LaunchPlan& plan, StatusServer* server, GpuStatsSource* gpus,
                             double resource_interval_s, std::optional<StragglerSettings> stragglers,
                             RunRecordSinks sinks, std::optional<JobStatusLink> job)
    : supervisor_(supervisor),
      server_(server),
      sampler_(gpus, plan.node_rank, resource_interval_s > 0 ? log_layout::resources_jsonl(plan.run_dir) : ""),
      start_time_(unix_seconds_now()),
      on_episodes_(std::move(sinks.episodes)),
      on_resumes_(std::move(sinks.resumes)),
      job_(std::move(job)) {
  const Clock::time_point now = Clock::now();
  if (stragglers) {
    stragglers_.emplace(*stragglers);
    progress_interval_ = progress_interval(stragglers->window_s);
    next_progress_ = now;
  }
  if (resource_interval_s > 0) {
    row_interval_ = steady_seconds(resource_interval_s);
    sample_interval_ = row_interval_;
    next_row_ = now + row_interval_;
  }
  if ((server_ || job_) && (sample_interval_ == Clock::duration::zero() || sample_interval_ > kStatusSampleInterval)) {
    sample_interval_ = kStatusSampleInterval;
  }
  if (job_) next_job_check_ = now;
  if (sample_interval_ > Clock::duration::zero()) next_sample_ = now;  // a first reading right away: CPU% needs two
  if (gpus) driver_version_ = gpus->driver_version();
}

void LaunchMonitor::add_fds(std::vector<pollfd>& fds) {
  if (server_) fds.push_back(pollfd{server_->command_fd(), POLLIN, 0});
}

void LaunchMonitor::on_ready(const pollfd&, Clock::time_point) {
  for (StatusCommand command : server_->take_commands()) {
    // The same paths as the signals: USR2 is forwarded (workers save and go on), USR1 is forwarded and
    // the workers save and exit 75, which ends the launcher with 75 (docs/monitoring.md).
    supervisor_.act_on_signal(command == StatusCommand::kCheckpoint ? SIGUSR2 : SIGUSR1);
  }
}

std::optional<Clock::time_point> LaunchMonitor::next_deadline() const {
  if (supervisor_.policy().finished()) return std::nullopt;
  std::optional<Clock::time_point> next;
  for (const auto& deadline : {next_sample_, next_progress_, next_job_check_}) {
    if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  return next;
}

void LaunchMonitor::refresh_ranks() {
  std::vector<RankStatus> ranks;
  for (const Supervisor::WorkerView& worker : supervisor_.worker_views()) {
    RankStatus rank;
    rank.rank = worker.global_rank;
    rank.local_rank = worker.local_rank;
    rank.pid = worker.pid;
    rank.state = worker.alive ? "running" : "exited";
    rank.heartbeat_file =
        server_ || stragglers_ || job_
            ? log_layout::heartbeat_file(log_layout::rank_dir(
                  supervisor_.plan().run_dir, supervisor_.policy().record().attempt(), worker.global_rank))
            : "";
    if (stragglers_) {
      rank.step_rate = stragglers_->step_rate(rank.rank);
      rank.straggler = stragglers_->flagged(rank.rank);
    }
    for (const RankStatus& old : ranks_) {  // keep the last sample's figures of the same process
      if (old.pid == rank.pid && worker.alive) {
        rank.cpu_percent = old.cpu_percent;
        rank.rss_bytes = old.rss_bytes;
      }
    }
    ranks.push_back(std::move(rank));
  }
  const int attempt = supervisor_.policy().record().attempt();
  if (job_ && attempt != ranks_attempt_ && ranks_attempt_ >= 0 && !ranks_.empty()) {
    // A new round: the last word on the ranks of the one before, their heartbeats read now, so that the host counts
    // the steps they made up to the stop (the steps a restart lost are counted from the newest).
    std::vector<RankStatus> ended = ranks_;
    for (RankStatus& rank : ended) rank.state = "exited";
    job_->report(node_status(ended, ranks_attempt_));
  }
  ranks_ = std::move(ranks);
  ranks_attempt_ = attempt;
}

void LaunchMonitor::on_time(Clock::time_point now) {
  refresh_ranks();
  note_resumes(false);
  bool sampled = false;
  if (next_sample_ && now >= *next_sample_) {
    bool write_row = next_row_ && now >= *next_row_;
    if (job_ && write_row) {
      // A node agent writes its rows into its node's directory (node_<k>/ or agent_<host>_<pid>/), which exists once
      // a round has started; before that there is nothing to sample.
      if (supervisor_.policy().record().attempt() < 0 || ranks_.empty()) {
        write_row = false;
        next_row_ = now + row_interval_;
      } else {
        sampler_.set_destination(supervisor_.plan().node_rank, log_layout::resources_jsonl(supervisor_.plan().run_dir));
      }
    }
    sampler_.sample(ranks_, write_row);
    if (write_row) next_row_ = now + row_interval_;
    next_sample_ = now + sample_interval_;
    sampled = true;
  }
  if (next_progress_ && now >= *next_progress_) {
    read_progress(now);
    next_progress_ = now + progress_interval_;
    refresh_ranks();  // the new rates and flags
    sampled = true;
  }
  if (next_job_check_ && now >= *next_job_check_) {
    next_job_check_ = now + kJobCheckInterval;
    exchange_job_status(now);
  }
  if (!server_) return;
  std::string signature =
      std::to_string(supervisor_.policy().record().attempt()) + (supervisor_.policy().attempt_running() ? "r" : "s");
  for (const RankStatus& rank : ranks_) signature += "," + std::to_string(rank.pid) + rank.state;
  if (sampled || signature != published_signature_) {
    published_signature_ = signature;
    publish();
  }
}

// Every attempt after the first, and a first one that resumed: its start as rank 0's progress file says it (heartbeat
// "start" and "from"; the files stay in the attempts' folders), once per attempt, to run.json. The current attempt is
// waited for until its rank 0 says, or `last` (the launch is over). A node agent's restarts are its rounds, whose
// recoveries the job's host records instead.
void LaunchMonitor::note_resumes(bool last) {
  if (!on_resumes_ || job_) return;
  const int current = supervisor_.policy().record().attempt();
  bool added = false;
  for (int attempt = resume_noted_attempt_ + 1; attempt <= current; ++attempt) {
    const ProgressFile file =
        read_progress_text(log_layout::heartbeat_file(log_layout::rank_dir(supervisor_.plan().run_dir, attempt, 0)));
    const std::optional<HeartbeatInfo> beat = file.read ? parse_heartbeat_line(file.text) : std::nullopt;
    const bool said = beat && beat->start_step && beat->start_source;
    // A worker that reports progress without saying where it started (a step count, or a line without "from"; the
    // trainer says it in its first line) never will: not read again.
    const bool never = !said && file.read && parse_progress(file.text);
    if (!said && !never && attempt == current && !last) break;  // not yet
    resume_noted_attempt_ = attempt;
    if (!said || (attempt == 0 && *beat->start_source == StartSource::kNone)) continue;  // silent, or a fresh start
    resumes_.push_back(ResumeRecord{attempt, *beat->start_step, *beat->start_source, beat->time});
    added = true;
  }
  if (added) on_resumes_(resumes_);
}

// Each running rank's step from its progress file (a heartbeat line or a decimal count; a file that is only
// touched has none and the rank is not judged), then the detector's verdict: a warning when a rank is flagged,
// a line when the flag clears, and the episodes so far to run.json whenever they change.
void LaunchMonitor::read_progress(Clock::time_point now) {
  const SupervisionPolicy& policy = supervisor_.policy();
  if (policy.record().attempt() != progress_attempt_ || !policy.attempt_running()) {
    stragglers_->restart(now);  // between attempts and at a new one: every rank warms up again
    progress_pids_.clear();
    progress_attempt_ = policy.record().attempt();
  }
  if (policy.attempt_running()) {
    for (const RankStatus& rank : ranks_) {
      if (!still_judged(rank.rank, rank.pid, rank.state == "running", now)) continue;
      const ProgressFile file = read_progress_text(rank.heartbeat_file);
      const std::optional<ProgressReport> report = file.read ? parse_progress(file.text) : std::nullopt;
      if (!report) continue;
      observe_progress(rank.rank, rank.pid, {supervisor_.plan().node_rank, supervisor_.plan().hostname},
                       steady_time_of(file.modified, now), *report);
    }
    if (job_ && job_->hosts()) observe_other_nodes(now);
  }
  const std::vector<StragglerChange> changes = stragglers_->evaluate(now);
  for (const StragglerChange& change : changes) {
    if (change.flagged()) {
      episode_attempts_.resize(stragglers_->episodes().size(), progress_attempt_);
      log::warn("{}", with_node(straggler_message(change), change.rank));
    } else {
      log::info("{}", with_node(straggler_message(change), change.rank));
    }
  }
  if (!changes.empty() && on_episodes_) on_episodes_(straggler_records());
}

// The job's host judges the other nodes' ranks by their reports as it judges its own by their files: the progress
// file's time on that node (only differences count) and its step.
void LaunchMonitor::observe_other_nodes(Clock::time_point now) {
  for (const rdzv::NodeStatus& node : job_->nodes()) {
    if (node.node_rank == supervisor_.plan().node_rank) continue;
    for (const rdzv::RankRow& row : node.ranks) {
      const pid_t pid = static_cast<pid_t>(row.pid);
      if (!still_judged(row.rank, pid, row.state == "running", now)) continue;
      if (!row.step || !row.progress_time) continue;
      observe_progress(row.rank, pid, {node.node_rank, node.host},
                       steady_time_of(system_time_of_unix(*row.progress_time), now), {*row.step, row.busy});
    }
  }
}

// A rank that exited, or whose process changed (a new attempt's), is forgotten; false when it is not running.
bool LaunchMonitor::still_judged(int rank, pid_t pid, bool running, Clock::time_point now) {
  const auto known = progress_pids_.find(rank);
  if (running && (known == progress_pids_.end() || known->second == pid)) return true;
  stragglers_->forget(rank, now);
  progress_pids_.erase(rank);
  return running;
}

// One progress reading of `rank` (process `pid`, on `node`: its node rank and host), written at `written`.
void LaunchMonitor::observe_progress(int rank, pid_t pid, std::pair<int, std::string> node, Clock::time_point written,
                                     const ProgressReport& report) {
  progress_pids_[rank] = pid;
  rank_nodes_[rank] = std::move(node);
  stragglers_->observe(rank, written, report.step, report.busy);
}

// "rank 3 is a straggler: ..." as "rank 3 (node 1, hostB) is a straggler: ..." when the ranks span several nodes.
std::string LaunchMonitor::with_node(std::string text, int rank) const {
  const auto node = rank_nodes_.find(rank);
  if (!job_ || node == rank_nodes_.end()) return text;
  const std::string prefix = "rank " + std::to_string(rank) + " ";
  if (text.rfind(prefix, 0) == 0) {
    text.insert(prefix.size() - 1, " (node " + std::to_string(node->second.first) + ", " + node->second.second + ")");
  }
  return text;
}

std::vector<StragglerRecord> LaunchMonitor::straggler_records() const {
  std::vector<StragglerRecord> records;
  const std::vector<StragglerEpisode>& episodes = stragglers_->episodes();
  for (std::size_t index = 0; index < episodes.size(); ++index) {
    const StragglerEpisode& episode = episodes[index];
    StragglerRecord record;
    record.rank = episode.rank;
    if (const auto node = rank_nodes_.find(episode.rank); job_ && node != rank_nodes_.end()) {
      record.node_rank = node->second.first;
      record.host = node->second.second;
    }
    record.attempt = index < episode_attempts_.size() ? episode_attempts_[index] : progress_attempt_;
    record.start = unix_time_of(episode.start);
    if (episode.end) record.end = unix_time_of(*episode.end);
    record.step_rate = episode.step_rate;
    record.median_step_rate = episode.median_step_rate;
    record.lowest_step_rate = episode.lowest_step_rate;
    if (episode.basis == StragglerBasis::kBusyTime) {
      record.busy_per_step = episode.busy_per_step;
      record.median_busy_per_step = episode.median_busy_per_step;
      record.highest_busy_per_step = episode.highest_busy_per_step;
    }
    records.push_back(record);
  }
  return records;
}

void LaunchMonitor::exchange_job_status(Clock::time_point now) {
  if (job_->tick) job_->tick();
  // A rank's process started or exited, or its first step: reported at once (the host times recoveries by it).
  rdzv::NodeStatus status = node_status(ranks_, ranks_attempt_);
  std::string signature = ranks_signature(supervisor_.policy().record().attempt(), ranks_);
  // A rank's first step made counts, not the heartbeat that only says where it resumed from.
  for (const rdzv::RankRow& row : status.ranks)
    signature += row.step && *row.step > row.start_step.value_or(0) ? "+" : "-";
  if (signature != reported_signature_ || now - last_report_ >= kJobReportInterval) {
    reported_signature_ = signature;
    last_report_ = now;
    job_->report(std::move(status));
  }
  if (!server_ || !job_->hosts()) return;
  const std::string remote = ranks_signature(supervisor_.policy().record().attempt(), other_nodes());
  if (remote != remote_signature_) {  // another node's rank started or exited: show it now
    remote_signature_ = remote;
    publish();
  }
}

rdzv::NodeStatus LaunchMonitor::node_status(const std::vector<RankStatus>& ranks, int round) const {
  rdzv::NodeStatus status;
  // The round these ranks ran in (a node agent's attempts are its rounds): a report of ranks that exited as a round
  // ended may reach the host after the next round began, and then counts for the round it describes.
  status.round = round;
  for (const RankStatus& rank : ranks) {
    rdzv::RankRow row;
    row.rank = rank.rank;
    row.local_rank = rank.local_rank;
    row.pid = rank.pid;
    row.state = rank.state;
    if (!rank.heartbeat_file.empty()) {
      const ProgressFile file = read_progress_text(rank.heartbeat_file);
      if (const std::optional<HeartbeatInfo> beat = file.read ? parse_heartbeat_line(file.text) : std::nullopt) {
        row.loss = beat->loss;
        row.beat_time = beat->time;
        row.start_step = beat->start_step;
        row.start_source = beat->start_source;
        row.snapshot_step = beat->snapshot_step;
        row.snapshot_time = beat->snapshot_time;
      }
      if (const std::optional<ProgressReport> report = file.read ? parse_progress(file.text) : std::nullopt) {
        row.step = report->step;
        row.progress_time = unix_seconds_of(file.modified);
        row.busy = report->busy;
      }
    }
    row.cpu_percent = rank.cpu_percent;
    row.rss_bytes = rank.rss_bytes;
    row.step_rate = rank.step_rate;
    row.straggler = rank.straggler;
    status.ranks.push_back(std::move(row));
  }
  return status;
}

std::vector<RankStatus> LaunchMonitor::other_nodes() const {
  std::vector<RankStatus> ranks;
  if (!job_ || !job_->nodes) return ranks;
  for (const rdzv::NodeStatus& node : job_->nodes()) {
    if (node.node_rank == supervisor_.plan().node_rank) continue;  // this node's own are read live
    for (const rdzv::RankRow& row : node.ranks) {
      RankStatus rank;
      rank.rank = row.rank;
      rank.local_rank = row.local_rank;
      rank.host = node.host;
      rank.node_rank = node.node_rank;
      rank.pid = static_cast<pid_t>(row.pid);
      rank.state = row.state;
      if (row.step) {
        rank.heartbeat = HeartbeatInfo{*row.step,      row.loss,         row.beat_time.value_or(0), std::nullopt,
                                       row.start_step, row.start_source, row.snapshot_step,         row.snapshot_time};
      }
      rank.cpu_percent = row.cpu_percent;
      rank.rss_bytes = row.rss_bytes;
      rank.step_rate = stragglers_ ? stragglers_->step_rate(row.rank) : row.step_rate;
      rank.straggler = stragglers_ ? stragglers_->flagged(row.rank) : row.straggler;
      ranks.push_back(std::move(rank));
    }
  }
  return ranks;
}

void LaunchMonitor::publish() {
  if (!node_view_token_.empty() && !ranks_.empty()) {
    // The node's folder (node_<k>/, agent_<host>_<pid>/) exists once its first round has started workers.
    write_status_files(supervisor_.plan().run_dir, node_view_token_, server_->endpoint());
    node_view_token_.clear();
  }
  server_->publish(snapshot(true));
}

StatusSnapshot LaunchMonitor::snapshot(bool job_view) const {
  const SupervisionPolicy& policy = supervisor_.policy();
  const LaunchPlan& plan = supervisor_.plan();  // the current round's (a node agent's changes each round)
  StatusSnapshot snapshot;
  snapshot.run_id = plan.run_id;
  snapshot.run_dir = plan.run_dir;
  snapshot.hostname = plan.hostname;
  snapshot.node_rank = plan.node_rank;
  snapshot.attempt = policy.record().attempt();
  snapshot.max_restarts = plan.max_restarts;
  snapshot.nodes = plan.nnodes;
  if (policy.attempt_running()) {
    snapshot.phase = "running";
  } else if (policy.finished()) {
    snapshot.phase = "finished";
  } else if (policy.waiting()) {
    snapshot.phase = "waiting";
  } else {
    snapshot.phase = ranks_.empty() ? "starting" : "stopping";
  }
  snapshot.time = unix_seconds_now();
  snapshot.start_time = start_time_;
  snapshot.ranks = ranks_;
  if (job_ && job_view) {
    snapshot.job_wide = job_->hosts();
    if (snapshot.job_wide) {
      std::vector<RankStatus> others = other_nodes();
      snapshot.ranks.insert(snapshot.ranks.end(), others.begin(), others.end());
      std::stable_sort(snapshot.ranks.begin(), snapshot.ranks.end(),
                       [](const RankStatus& a, const RankStatus& b) { return a.rank < b.rank; });
      for (const rdzv::NodeStatus& node : job_->nodes ? job_->nodes() : std::vector<rdzv::NodeStatus>()) {
        if (node.replication) snapshot.replication.push_back(node_replication(node, snapshot.time));
      }
      if (job_->last_recovery) {
        if (auto recovery = job_->last_recovery()) {
          snapshot.last_recovery_round = recovery->first;
          snapshot.last_recovery = recovery->second;
        }
      }
    } else {
      snapshot.job_status_host = job_->job_status_host();
    }
  }
  snapshot.gpus = sampler_.gpus();
  snapshot.driver_version = driver_version_;
  if (sampler_.last_sample_time() > 0) snapshot.gpu_sample_time = sampler_.last_sample_time();
  snapshot.straggler_detection = stragglers_.has_value();
  return snapshot;
}

}  // namespace mgtrain

namespace mgtrain {

std::string gpu_health_line(const std::vector<GpuSample>& gpus, const std::string& driver_version) {
  if (gpus.empty()) return "";
  // Same model and size: "2 x NAME (80.0 GiB)"; otherwise one entry per kind, in index order.
  std::vector<std::pair<std::string, int>> kinds;
  for (const GpuSample& gpu : gpus) {
    char memory[32] = "";
    if (gpu.memory_total_bytes > 0)
      std::snprintf(memory, sizeof memory, " (%.1f GiB)", gpu.memory_total_bytes / 1073741824.0);
    const std::string kind = (gpu.name.empty() ? std::string("unknown GPU") : gpu.name) + memory;
    if (!kinds.empty() && kinds.back().first == kind) {
      ++kinds.back().second;
    } else {
      kinds.emplace_back(kind, 1);
    }
  }
  std::string line = "mgtrain: GPUs (NVML): ";
  for (std::size_t i = 0; i < kinds.size(); ++i)
    line += (i ? ", " : "") + std::to_string(kinds[i].second) + " x " + kinds[i].first;
  if (!driver_version.empty()) line += ", driver " + driver_version;
  return line;
}

std::optional<StragglerSettings> straggler_settings(const LaunchPlan& plan, const LaunchConfig& launch, bool job_wide) {
  const int ranks = job_wide ? plan.nproc * std::max(plan.nnodes, plan.max_nodes) : plan.nproc;
  if (!launch.straggler_detection || !workers_get_progress_file(plan) || ranks < 2) return std::nullopt;
  const StragglerSettings settings{launch.straggler_margin, launch.straggler_window};
  StragglerDetector check(settings);  // throws UsageError for settings it refuses
  return settings;
}

LaunchMonitoring::LaunchMonitoring(Supervisor& supervisor, const LaunchPlan& plan, const Config& config,
                                   RankDiagnostics& dumps, RunRecordSinks sinks, std::optional<JobStatusLink> job)
    : supervisor_(supervisor), dumps_(dumps) {
  const LaunchConfig& launch = config.launch;
  const double interval = config.log.resource_interval_s;
  const std::optional<StragglerSettings> stragglers = straggler_settings(plan, launch, job.has_value());
  gpus_ = open_nvml();  // nullptr without the NVIDIA driver: no GPU statistics, not an error
  if (gpus_) {
    const std::string line = gpu_health_line(gpus_->sample(), gpus_->driver_version());
    if (!line.empty()) log::text(line + "\n");
  }
  std::string node_view_token;  // a node's own view: its files wait for its folder
  if (launch.status_port > 0) {
    StatusServer::Options options;
    options.bind = launch.status_bind;
    options.port = static_cast<int>(launch.status_port);
    options.run_dir = plan.run_dir;
    options.token = generate_status_token();
    // POST /stacks: bounded like a hang's dump (launch.diagnose_timeout; its 0 turns off only the hang's).
    const double dump_timeout_s = launch.diagnose_timeout > 0 ? std::min(launch.diagnose_timeout, kMaxStacksDumpS)
                                                              : launch_defaults::kDiagnoseTimeoutS;
    options.dump_stacks = [dump_timeout_s, &dumps](StatusSnapshot snapshot) {
      // This node's ranks: on a multi-node job's host the snapshot also lists the other nodes', which are not this
      // launcher's to dump (docs/diagnosis.md#stacks-on-demand).
      snapshot.ranks.erase(std::remove_if(snapshot.ranks.begin(), snapshot.ranks.end(),
                                          [](const RankStatus& rank) { return rank.node_rank >= 0; }),
                           snapshot.ranks.end());
      return dumps.request_stacks(snapshot, dump_timeout_s);
    };
    // A node of a multi-node job that does not host the rendezvous serves its own ranks' view beside the job's
    // (docs/monitoring.md#several-nodes): a busy port there (another agent of the job on this machine) only costs
    // that view, and its files go into the node's own folder once its first round has made it.
    const bool node_view = job && job->hosts && !job->hosts();
    try {
      server_ = std::make_unique<StatusServer>(options);  // binds now: a busy port fails before any worker starts
    } catch (const UsageError& error) {
      if (!node_view) throw;
      log::warn("this node serves no status API of its own: {}; its ranks are in the job's view", error.what());
    }
    if (server_ && node_view) {
      node_view_token = options.token;
    } else if (server_) {
      write_status_files(plan.run_dir, options.token, server_->endpoint());
    }
  }
  if (!server_ && interval <= 0 && !stragglers && !job) return;
  std::function<std::optional<rdzv::StacksRefusal>(double)> start_job_stacks;
  std::function<std::optional<rdzv::JobStacks>()> take_job_stacks;
  if (job) {
    serve_stacks_ = job->serve_stacks;
    start_job_stacks = job->start_job_stacks;
    take_job_stacks = job->take_job_stacks;
  }
  monitor_ = std::make_unique<LaunchMonitor>(supervisor, plan, server_.get(), gpus_.get(), interval, stragglers,
                                             std::move(sinks), std::move(job));
  supervisor.add_participant(*monitor_);
  if (!node_view_token.empty()) monitor_->write_status_files_when_started(node_view_token);
  // Several nodes: the job's host asks this node for its ranks' stacks (docs/diagnosis.md#stacks-on-demand), and on
  // the host a POST /stacks of the job-wide view asks every node.
  if (serve_stacks_) {
    serve_stacks_([&dumps, monitor = monitor_.get()](double timeout_s, std::function<void(rdzv::NodeStacks)> answer) {
      dumps.dump_for_job(monitor->snapshot(false), std::min(timeout_s, kMaxStacksDumpS),
                         [answer = std::move(answer)](const StacksDump& dump) { answer(node_stacks_of(dump)); });
    });
  }
  if (server_ && start_job_stacks && take_job_stacks) {
    RankDiagnostics::JobStacksSource source;
    source.start = [start_job_stacks](double timeout_s) -> std::optional<StacksDump> {
      if (std::optional<rdzv::StacksRefusal> refused = start_job_stacks(timeout_s)) return job_stacks_refusal(*refused);
      return std::nullopt;
    };
    source.take = [take_job_stacks]() -> std::optional<StacksDump> {
      if (std::optional<rdzv::JobStacks> job_stacks = take_job_stacks()) return job_stacks_dump(*job_stacks);
      return std::nullopt;
    };
    dumps.set_job_source(std::move(source));
  }
  if (server_) monitor_->publish();  // a first snapshot (run id, no ranks yet) before serving
  if (server_) server_->start();
}

void LaunchMonitoring::flush_records() {
  if (monitor_) monitor_->note_resumes(true);
}

LaunchMonitoring::~LaunchMonitoring() {
  if (serve_stacks_) serve_stacks_(nullptr);  // the agent must not reach the monitor below once it is gone
  dumps_.close_requests();  // the loop has ended: a POST /stacks waiting for it is answered before the server stops
  if (monitor_) supervisor_.remove_participant(*monitor_);
  monitor_.reset();
  server_.reset();  // stops serving before NVML goes
}

}  // namespace mgtrain
