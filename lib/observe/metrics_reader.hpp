// Reading <run dir>/metrics.jsonl, the training curves rank 0 of the worker appends (docs/monitoring.md):
// one flat JSON object per line, {"kind":"train"|"eval","step":N,...numbers...}. Readers tail the file while
// it grows, so an incomplete last line (no '\n' yet) is left for later, and a restarted or resumed run
// appends steps again: the last row per (kind, step) wins. Used by `mgtrain runs`, `mgtrain plot` and the
// status API; torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mgtrain {

// One row: its kind, its step, and every numeric field other than "step" (loss, lr, time, epoch, attempt,
// eval.loss, ...). A field written as null (or not a number) is absent here.
struct MetricsRow {
  std::string kind;
  std::int64_t step = 0;
  std::map<std::string, double> values;

  std::optional<double> value(const std::string& name) const;
};

// One point of a curve.
struct MetricPoint {
  std::int64_t step = 0;
  double value = 0;
};

// The rows read so far, the last one per (kind, step).
class MetricsLog {
 public:
  // Parses the complete lines of `text` (everything up to its last '\n') and returns the number of bytes
  // consumed; the rest is an incomplete line to offer again once it has grown. `first_line` numbers the
  // first line for problem messages. Lines that are not a JSON object with an integer "step" are skipped
  // and described in problems().
  std::size_t add_lines(std::string_view text, std::size_t first_line = 1);

  // All rows, ordered by kind then step.
  std::vector<MetricsRow> rows() const;
  bool empty() const { return rows_.empty(); }
  std::size_t size() const { return rows_.size(); }
  // Rows accepted so far, repeated steps included: changes whenever add_lines added something.
  std::size_t accepted_rows() const { return accepted_rows_; }
  // The names of the numeric fields that vary with training, sorted: every field of any row except
  // "step", "time", "epoch" and "attempt" (e.g. eval.accuracy, eval.loss, loss, lr, samples_per_s).
  std::vector<std::string> metric_names() const;
  // The curve of one metric: (step, value) of every row that has it, by step.
  std::vector<MetricPoint> series(const std::string& metric) const;
  // The highest step of any "train" row (of any row when there is none).
  std::optional<std::int64_t> last_step() const;
  // The newest row of a kind (highest step), e.g. the latest "train" row for a status display.
  std::optional<MetricsRow> latest(const std::string& kind) const;
  // Complete lines that could not be read: "line 17: <why>" (at most the first 20 are kept).
  const std::vector<std::string>& problems() const { return problems_; }
  std::size_t problem_count() const { return problem_count_; }

  void clear();

 private:
  void add_line(std::string_view line, std::size_t line_number);

  std::map<std::pair<std::string, std::int64_t>, MetricsRow> rows_;
  std::vector<std::string> problems_;
  std::size_t problem_count_ = 0;
  std::size_t accepted_rows_ = 0;
};

// Follows one metrics.jsonl: each refresh() reads only what was appended since the last one (a file that
// shrank or was replaced is read again from the start). A missing file is an empty log, not an error.
class MetricsFileReader {
 public:
  explicit MetricsFileReader(std::string path) : path_(std::move(path)) {}
  // Reads what is new; returns true when rows were added. Throws SystemError when the file exists but
  // cannot be read.
  bool refresh();
  const MetricsLog& log() const { return log_; }
  const std::string& path() const { return path_; }
  bool exists() const { return exists_; }
  // Bytes of an incomplete last line left unread (a writer in the middle of a line, or a torn last line).
  std::size_t pending_bytes() const { return pending_bytes_; }

 private:
  std::string path_;
  MetricsLog log_;
  std::uint64_t offset_ = 0;  // bytes consumed (complete lines)
  std::size_t next_line_ = 1;
  std::size_t pending_bytes_ = 0;
  bool exists_ = false;
  std::uint64_t inode_ = 0;
};

// Reads a whole metrics.jsonl once (see MetricsFileReader).
MetricsLog read_metrics_file(const std::string& path);

}  // namespace mgtrain
