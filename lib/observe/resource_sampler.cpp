// Takes resource samples and appends them to resources.jsonl (see resource_sampler.hpp).
#include "observe/resource_sampler.hpp"
#include "util/fd.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mgtrain {

ResourceSampler::ResourceSampler(GpuStatsSource* gpus, int node_rank, std::string jsonl_path)
    : gpu_source_(gpus), node_rank_(node_rank), jsonl_path_(std::move(jsonl_path)) {}

void ResourceSampler::sample(std::vector<RankStatus>& ranks, bool write_row) {
  const auto now = std::chrono::steady_clock::now();
  last_time_ = unix_seconds_now();
  std::map<pid_t, Reading> current;
  for (RankStatus& rank : ranks) {
    rank.cpu_percent.reset();
    rank.rss_bytes.reset();
    if (rank.state != "running" || rank.pid <= 0) continue;
    std::optional<ProcessStats> stats = read_process_stats(rank.pid);
    if (!stats) continue;
    rank.rss_bytes = stats->rss_bytes;
    auto before = previous_.find(rank.pid);
    if (before != previous_.end()) {
      rank.cpu_percent =
          cpu_percent(before->second.stats, *stats, std::chrono::duration<double>(now - before->second.when).count());
    }
    current[rank.pid] = Reading{*stats, now};
  }
  previous_ = std::move(current);
  if (gpu_source_) gpus_ = gpu_source_->sample();
  if (!write_row || jsonl_path_.empty()) return;

  const std::string line = resources_row_json(last_time_, node_rank_, ranks, gpus_) + "\n";
  const Fd fd(open(jsonl_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  const bool ok = fd && write(fd.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int error = errno;
  if (!ok && !write_failed_) {
    write_failed_ = true;
    log::warn("cannot append to {}: {}; resource samples are not recorded (the status API still shows them)",
              jsonl_path_, std::strerror(error));
  }
}

}  // namespace mgtrain
