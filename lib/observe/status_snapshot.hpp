// What the status API shows, as plain data, and its renderings: the /status JSON, the /metrics
// Prometheus text and the resources.jsonl row. Pure: the
// launcher's loop fills a StatusSnapshot, the HTTP thread renders it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contract/heartbeat_line.hpp"
#include "host/nvml_library.hpp"
#include "observe/run_record.hpp"

namespace mgtrain {

// One rank as the launcher sees it: of this node, or (on the job's host of a multi-node job) of another node as that
// node's launcher reported it.
struct RankStatus {
  int rank = 0;
  int local_rank = 0;
  std::string host;    // the rank's node's hostname; "": this node's (the snapshot's hostname)
  int node_rank = -1;  // -1: this node's
  pid_t pid = -1;
  std::string state;           // "running" or "exited"
  std::string heartbeat_file;  // where its heartbeat is read from (not rendered)
  std::optional<HeartbeatInfo> heartbeat;
  std::optional<double> cpu_percent;  // from the latest resource sample
  std::optional<std::int64_t> rss_bytes;
  std::optional<double> step_rate;  // steps/s over the straggler window (observe/straggler_detector.hpp)
  bool straggler = false;           // flagged as a straggler now
};

struct StatusSnapshot {
  std::string run_id;
  std::string run_dir;
  std::string hostname;
  int node_rank = 0;
  int attempt = 0;  // 0-based; restarts = attempt
  int max_restarts = 0;
  std::string phase;  // "running", "stopping", "finished"
  double time = 0;    // Unix seconds the snapshot was taken (heartbeats are read at request time)
  double start_time = 0;
  std::vector<RankStatus> ranks;
  std::vector<GpuSample> gpus;
  std::string driver_version;
  std::optional<double> gpu_sample_time;
  bool straggler_detection = false;  // ranks' step rates are judged (launch.straggler_detection, progress files)
  // Several nodes: `job_wide` on the agent that hosts the rendezvous (ranks holds every node's); elsewhere
  // `job_status_host` names where the job-wide view is served (the rendezvous host), and ranks holds this node's.
  bool job_wide = false;
  int nodes = 1;
  std::string job_status_host;
  // The job's host: the newest completed recovery (a restart or regroup whose first step was seen) and its round.
  std::optional<RoundEntry::Recovery> last_recovery;
  int last_recovery_round = -1;
  std::vector<NodeReplication> replication;  // the job's host: every node's that replicates, by node rank
};

// The /status JSON (nlohmann::json, compact, keys in schema order).
std::string status_to_json(const StatusSnapshot& snapshot);
// Prometheus text exposition format 0.0.4: HELP/TYPE once per metric, samples grouped, labels escaped.
std::string status_to_prometheus(const StatusSnapshot& snapshot);
// Escapes a Prometheus label value (backslash, double quote, newline).
std::string prometheus_label_value(std::string_view text);

// One <run dir>/resources.jsonl row (no newline).
std::string resources_row_json(double time, int node_rank, const std::vector<RankStatus>& ranks,
                               const std::vector<GpuSample>& gpus);

// The dashboard's curves from the text of <run dir>/metrics.jsonl: {"train":[[step,loss],...],
// "eval":[[step,eval.loss],...]}, the last row per step winning (restarts repeat steps), by step, at
// most `max_points` per curve (evenly thinned, the last kept). Only complete lines count: a torn last
// line (no '\n' yet) and lines that are not such rows are skipped.
std::string metrics_curves_json(std::string_view jsonl_text, std::size_t max_points = 2000);

}  // namespace mgtrain
