// torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters (PET_DUPLICATE_STDOUT_FILTERS /
// PET_DUPLICATE_STDERR_FILTERS): the console lines of a stream that contain any of the filters are also copied,
// behind their console prefix, to one file per attempt that every rank of the node shares:
// <run dir>/attempt_N/filtered_stdout.log and filtered_stderr.log (log_layout.hpp), as torch's DefaultLogsSpecs
// writes <log_dir>/<run_id>/attempt_N/filtered_*.log. Which streams are copied is the supervisor's rule: those
// whose console lines carry a prefix (every console stream in mgtrain's personality, teed ones in torchrun's).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/fd.hpp"

namespace mgtrain {

inline constexpr const char* kDuplicateStdoutFiltersVariable = "PET_DUPLICATE_STDOUT_FILTERS";
inline constexpr const char* kDuplicateStderrFiltersVariable = "PET_DUPLICATE_STDERR_FILTERS";

// torchrun's comma_separated_list: the text cut at each ',', where ",," is a literal comma. "" is one empty
// filter, which every line contains (torchrun behaves so, although its help says an empty list copies nothing).
std::vector<std::string> parse_duplicate_filters(const std::string& text);

// One filtered file, shared by the streams that feed it.
class FilteredLog {
 public:
  // Creates (truncates) the file. Throws SystemError when it cannot.
  FilteredLog(const std::string& path, std::vector<std::string> filters);

  // `lines` are whole lines of one stream, each ended by '\n' (a last piece without one counts as a line and
  // gets one); those containing a filter are written behind `prefix` in one write, so ranks' lines never tear.
  void add_lines(std::string_view lines, std::string_view prefix);

 private:
  bool matches(std::string_view line) const;

  Fd file_;
  std::vector<std::string> filters_;
  std::string batch_;  // reused between calls
};

}  // namespace mgtrain
