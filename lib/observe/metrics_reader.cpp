// Parses metrics.jsonl rows (see metrics_reader.hpp). The rows are flat JSON objects, so a small scanner reads
// them instead of nlohmann::json (every other JSON in mgtrain). Kept for two measured reasons:
//  - speed: 200k train rows (36 MB) take 0.46-0.49 s here against 0.79-0.80 s with nlohmann::json per line
//    building the same rows (scripts/bench/metrics_jsonl_bench.sh, 2-core VM); `mgtrain runs` reads every run's file;
//  - NaN, Infinity and -Infinity, which Python's json.dumps writes by default, are read as numbers here;
//    nlohmann::json refuses those lines.
#include "observe/metrics_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

constexpr std::size_t kKeptProblems = 20;

// A scanner over one line holding a JSON object whose values are strings, numbers, true/false/null, or
// (skipped) nested arrays and objects. Also accepts NaN, Infinity and -Infinity, which some writers emit.
class FlatObjectScanner {
 public:
  explicit FlatObjectScanner(std::string_view text) : text_(text) {}

  struct Field {
    std::string key;
    enum class Type { kString, kNumber, kOther } type = Type::kOther;
    std::string text;   // kString
    double number = 0;  // kNumber
    bool integral = false;
  };

  // Calls `on_field` for each member; returns "" or what is wrong.
  template <class OnField>
  std::string scan(OnField on_field) {
    skip_space();
    if (!take('{')) return "not a JSON object";
    skip_space();
    if (take('}')) return trailing();
    while (true) {
      Field field;
      skip_space();
      if (!read_string(field.key)) return fmt::format("expected a quoted key at column {}", pos_ + 1);
      skip_space();
      if (!take(':')) return fmt::format("expected ':' at column {}", pos_ + 1);
      skip_space();
      std::string problem = read_value(field);
      if (!problem.empty()) return problem;
      on_field(field);
      skip_space();
      if (take(',')) continue;
      if (take('}')) return trailing();
      return fmt::format("expected ',' or '}}' at column {}", pos_ + 1);
    }
  }

 private:
  std::string trailing() {
    skip_space();
    return pos_ == text_.size() ? "" : fmt::format("unexpected text after the object at column {}", pos_ + 1);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  }
  bool take(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool take_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }
  bool read_string(std::string& out) {
    if (!take('"')) return false;
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return false;
      char e = text_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return false;
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            char h = text_[pos_++];
            code <<= 4;
            if (h >= '0' && h <= '9')
              code |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f')
              code |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              code |= static_cast<unsigned>(h - 'A' + 10);
            else
              return false;
          }
          append_utf8(out, code);  // surrogate pairs are not needed for metric names
          break;
        }
        default:
          out += e;  // \" \\ \/
      }
    }
    return false;
  }
  // Skips a nested array or object, strings inside included.
  bool skip_nested() {
    int depth = 0;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '"') {
        std::string ignored;
        if (!read_string(ignored)) return false;
        continue;
      }
      ++pos_;
      if (c == '[' || c == '{') ++depth;
      if (c == ']' || c == '}') {
        if (--depth == 0) return true;
      }
    }
    return false;
  }
  std::string read_value(Field& field) {
    if (pos_ >= text_.size()) return "the line ends where a value was expected";
    char c = text_[pos_];
    if (c == '"') {
      field.type = Field::Type::kString;
      return read_string(field.text) ? "" : "unterminated string";
    }
    if (c == '[' || c == '{') return skip_nested() ? "" : "unterminated array or object";
    if (take_word("null") || take_word("true") || take_word("false")) return "";
    field.type = Field::Type::kNumber;
    if (take_word("NaN")) {
      field.number = std::nan("");
      return "";
    }
    if (take_word("Infinity")) {
      field.number = HUGE_VAL;
      return "";
    }
    if (take_word("-Infinity")) {
      field.number = -HUGE_VAL;
      return "";
    }
    const std::string token(text_.substr(pos_, std::min<std::size_t>(64, text_.size() - pos_)));
    char* end = nullptr;
    field.number = std::strtod(token.c_str(), &end);
    const std::size_t used = static_cast<std::size_t>(end - token.c_str());
    if (used == 0 || (c != '-' && (c < '0' || c > '9'))) {
      return fmt::format("'{}' at column {} is not a JSON value", token.substr(0, 16), pos_ + 1);
    }
    const std::string_view number = text_.substr(pos_, used);
    field.integral = number.find_first_of(".eE") == std::string_view::npos;
    pos_ += used;
    return "";
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::optional<double> MetricsRow::value(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

void MetricsLog::add_line(std::string_view line, std::size_t line_number) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank lines are harmless
  MetricsRow row;
  bool has_step = false;
  std::string step_problem;
  FlatObjectScanner scanner(line);
  std::string problem = scanner.scan([&](const FlatObjectScanner::Field& field) {
    using Type = FlatObjectScanner::Field::Type;
    if (field.key == "kind") {
      if (field.type == Type::kString) row.kind = field.text;
    } else if (field.key == "step") {
      if (field.type == Type::kNumber && field.integral && std::isfinite(field.number)) {
        row.step = static_cast<std::int64_t>(field.number);
        has_step = true;
      } else {
        step_problem = "\"step\" is not an integer";
      }
    } else if (field.type == Type::kNumber) {
      row.values[field.key] = field.number;
    }
  });
  if (problem.empty() && !step_problem.empty()) problem = step_problem;
  if (problem.empty() && !has_step) problem = "no \"step\"";
  if (!problem.empty()) {
    ++problem_count_;
    if (problems_.size() < kKeptProblems) problems_.push_back(fmt::format("line {}: {}", line_number, problem));
    return;
  }
  auto key = std::make_pair(row.kind, row.step);
  rows_[key] = std::move(row);  // a repeated step (after a restart) replaces the earlier row
  ++accepted_rows_;
}

std::size_t MetricsLog::add_lines(std::string_view text, std::size_t first_line) {
  std::size_t start = 0;
  std::size_t line_number = first_line;
  while (true) {
    std::size_t newline = text.find('\n', start);
    if (newline == std::string_view::npos) break;
    add_line(text.substr(start, newline - start), line_number++);
    start = newline + 1;
  }
  return start;
}

std::vector<MetricsRow> MetricsLog::rows() const {
  std::vector<MetricsRow> out;
  out.reserve(rows_.size());
  for (const auto& [key, row] : rows_) out.push_back(row);
  return out;
}

std::vector<std::string> MetricsLog::metric_names() const {
  static const std::set<std::string> kBookkeeping = {"time", "epoch", "attempt"};
  std::set<std::string> names;
  for (const auto& [key, row] : rows_) {
    for (const auto& [name, value] : row.values) {
      if (!kBookkeeping.count(name)) names.insert(name);
    }
  }
  return {names.begin(), names.end()};
}

std::vector<MetricPoint> MetricsLog::series(const std::string& metric) const {
  std::vector<MetricPoint> out;
  for (const auto& [key, row] : rows_) {
    auto it = row.values.find(metric);
    if (it != row.values.end()) out.push_back({row.step, it->second});
  }
  std::stable_sort(out.begin(), out.end(), [](const MetricPoint& a, const MetricPoint& b) { return a.step < b.step; });
  return out;
}

std::optional<std::int64_t> MetricsLog::last_step() const {
  std::optional<std::int64_t> train, any;
  for (const auto& [key, row] : rows_) {
    if (!any || row.step > *any) any = row.step;
    if (row.kind == "train" && (!train || row.step > *train)) train = row.step;
  }
  return train ? train : any;
}

std::optional<MetricsRow> MetricsLog::latest(const std::string& kind) const {
  auto it = rows_.lower_bound({kind, INT64_MAX});
  if (it != rows_.end() && it->first.first == kind) return it->second;  // step INT64_MAX itself
  if (it == rows_.begin()) return std::nullopt;
  --it;
  if (it->first.first != kind) return std::nullopt;
  return it->second;
}

void MetricsLog::clear() {
  rows_.clear();
  problems_.clear();
  problem_count_ = 0;
  accepted_rows_ = 0;
}

bool MetricsFileReader::refresh() {
  const Fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      exists_ = false;
      return false;
    }
    throw SystemError("cannot open " + path_, errno);
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) throw SystemError("cannot stat " + path_, errno);
  exists_ = true;
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (static_cast<std::uint64_t>(info.st_ino) != inode_ || size < offset_) {  // replaced or truncated: start over
    log_.clear();
    offset_ = 0;
    next_line_ = 1;
    inode_ = static_cast<std::uint64_t>(info.st_ino);
  }
  const std::size_t before = log_.accepted_rows();
  std::string buffer;
  buffer.resize(static_cast<std::size_t>(size - offset_));
  std::size_t have = 0;
  while (have < buffer.size()) {
    ssize_t n = ::pread(fd.get(), buffer.data() + have, buffer.size() - have, static_cast<off_t>(offset_ + have));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("cannot read " + path_, errno);
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  buffer.resize(have);
  const std::size_t consumed = log_.add_lines(buffer, next_line_);
  next_line_ += static_cast<std::size_t>(
      std::count(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(consumed), '\n'));
  offset_ += consumed;
  pending_bytes_ = buffer.size() - consumed;
  return log_.accepted_rows() != before;
}

MetricsLog read_metrics_file(const std::string& path) {
  MetricsFileReader reader(path);
  reader.refresh();
  return reader.log();
}

}  // namespace mgtrain
