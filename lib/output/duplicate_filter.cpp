// The filtered copies of console lines (torchrun's --duplicate-*-filters).
#include "output/duplicate_filter.hpp"

#include <fcntl.h>

#include <cerrno>

#include "util/error.hpp"

namespace mgtrain {

std::vector<std::string> parse_duplicate_filters(const std::string& text) {
  std::vector<std::string> filters(1);
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (text[at] != ',') {
      filters.back() += text[at];
    } else if (at + 1 < text.size() && text[at + 1] == ',') {
      filters.back() += ',';  // ",," (torch replaces every ",," before it splits, left to right)
      ++at;
    } else {
      filters.emplace_back();
    }
  }
  return filters;
}

FilteredLog::FilteredLog(const std::string& path, std::vector<std::string> filters)
    : file_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644)),
      filters_(std::move(filters)) {
  if (!file_) {
    throw SystemError("cannot create " + path +
                          " (--duplicate-stdout-filters / --duplicate-stderr-filters; check "
                          "launch.log_dir)",
                      errno);
  }
}

bool FilteredLog::matches(std::string_view line) const {
  for (const std::string& filter : filters_) {
    if (line.find(filter) != std::string_view::npos) return true;
  }
  return false;
}

void FilteredLog::add_lines(std::string_view lines, std::string_view prefix) {
  if (!file_) return;
  batch_.clear();
  while (!lines.empty()) {
    const std::size_t end = lines.find('\n');
    const std::string_view line = lines.substr(0, end);
    lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 1);
    if (!matches(line)) continue;
    batch_.append(prefix);
    batch_.append(line);
    batch_ += '\n';
  }
  if (!batch_.empty() && !write_fully(file_.get(), batch_).empty()) file_.reset();  // disk full: the job goes on
}

}  // namespace mgtrain
