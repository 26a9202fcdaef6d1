// The launcher's resource sampler: per-rank CPU% and resident memory (process_stats) and per-GPU
// statistics (a GpuStatsSource, NVML when present), taken when the launcher's loop asks, and appended
// as one row to <run dir>/resources.jsonl (docs/monitoring.md) when a row is due.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "host/nvml_library.hpp"
#include "host/process_stats.hpp"
#include "observe/status_snapshot.hpp"

namespace mgtrain {

class ResourceSampler {
 public:
  // `gpus` may be null (no NVML); `jsonl_path` "" writes no file.
  ResourceSampler(GpuStatsSource* gpus, int node_rank, std::string jsonl_path);

  // Reads every running rank's /proc figures (CPU% needs an earlier reading of the same pid, so a rank's
  // first sample has none) and the GPUs, fills cpu_percent/rss_bytes of `ranks`, and appends a row
  // when `write_row`. A failed write is said once on stderr and sampling goes on.
  void sample(std::vector<RankStatus>& ranks, bool write_row);
  // Rows go to `jsonl_path` from now on, as node `node_rank`'s ("" writes none): a node agent's node directory is
  // known once its first round started.
  void set_destination(int node_rank, std::string jsonl_path) {
    node_rank_ = node_rank;
    jsonl_path_ = std::move(jsonl_path);
  }

  const std::vector<GpuSample>& gpus() const { return gpus_; }
  double last_sample_time() const { return last_time_; }

 private:
  struct Reading {
    ProcessStats stats;
    std::chrono::steady_clock::time_point when;
  };
  GpuStatsSource* gpu_source_;
  int node_rank_;
  std::string jsonl_path_;
  std::map<pid_t, Reading> previous_;
  std::vector<GpuSample> gpus_;
  double last_time_ = 0;
  bool write_failed_ = false;
};

}  // namespace mgtrain
