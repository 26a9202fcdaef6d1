// Rows of metrics.jsonl and their appending writer (see metrics_writer.hpp).
#include "worker_io/metrics_writer.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

// Shortest round-trip form; JSON has no NaN or infinity.
std::string number(double value) { return std::isfinite(value) ? fmt::format("{}", value) : "null"; }

}  // namespace

std::string train_metrics_json(const TrainMetricsRow& row) {
  std::string out = fmt::format(R"({{"kind":"train","step":{},"epoch":{},"time":{:.3f},"loss":{},"lr":{},"samples_per_s":{},)"
                                R"("step_time_ms":{},"rss_bytes":{})",
                                row.step, row.epoch, row.time, number(row.loss), number(row.lr), number(row.samples_per_s),
                                number(row.step_time_ms), row.rss_bytes);
  if (row.cuda_allocated_bytes) out += fmt::format(R"(,"cuda_allocated_bytes":{})", *row.cuda_allocated_bytes);
  if (row.loss_scale) out += fmt::format(R"(,"loss_scale":{})", number(*row.loss_scale));
  out += fmt::format(R"(,"attempt":{}}})", row.attempt);
  return out;
}

std::string eval_metrics_json(const EvalMetricsRow& row) {
  std::string out = fmt::format(R"({{"kind":"eval","step":{},"epoch":{},"time":{:.3f},"eval.loss":{},"eval.accuracy":{})", row.step,
                                row.epoch, row.time, number(row.loss), number(row.accuracy));
  if (row.perplexity) out += fmt::format(R"(,"eval.perplexity":{})", number(*row.perplexity));
  out += fmt::format(R"(,"attempt":{}}})", row.attempt);
  return out;
}

std::int64_t resident_set_bytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (!file) return 0;
  long long size_pages = 0, resident_pages = 0;
  const bool ok = std::fscanf(file, "%lld %lld", &size_pages, &resident_pages) == 2;
  std::fclose(file);
  return ok ? resident_pages * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw SystemError("cannot open the metrics file " + path + " (set log.metrics_every_steps: 0 to go without)", errno);
  // A writer that died mid-line left a torn row: end it so ours start on a line of their own.
  char last = '\n';
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  if (size > 0 && ::pread(fd_, &last, 1, size - 1) == 1 && last != '\n') append("");
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::append(const std::string& json) {
  if (fd_ < 0) return;
  const std::string line = json + '\n';
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t written = ::write(fd_, line.data() + done, line.size() - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      std::fprintf(stderr, "mgtrain: warning: cannot write the metrics file %s (%s); no more metrics rows this run\n", path_.c_str(),
                   written < 0 ? std::strerror(errno) : "short write");
      ::close(fd_);
      fd_ = -1;
      return;
    }
    done += static_cast<std::size_t>(written);
  }
}

}  // namespace mgtrain
