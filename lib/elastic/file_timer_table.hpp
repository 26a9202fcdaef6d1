// The file timer's protocol and timer table, without pipe or clock (torch 2.x
// torch/distributed/elastic/timer/file_based_local_timer.py, FileTimerServer). A worker's FileTimerClient
// writes one JSON line per request into the named pipe TORCHELASTIC_TIMER_FILE:
//   {"version": 1, "pid": 4242, "scope_id": "train.py#12", "expiration_time": 1700000001.5, "signal": 9}
// acquire: an expiration time (Unix seconds, the worker's clock); release: a negative expiration time.
// Timers are kept per (pid, scope_id); once one expires, its pid gets the request's signal and every
// timer of that pid is dropped, as torch's server does.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mgtrain {

struct FileTimerRequest {
  long pid = 0;
  std::string scope_id;
  double expiration_time = 0;  // Unix seconds; negative: release
  int signal = 0;
};

struct ExpiredFileTimer {
  long pid = 0;
  std::string scope_id;
  double expiration_time = 0;
  int signal = 0;
};

// One line of the protocol; nullopt with `problem` set when it is not a version-1 request.
std::optional<FileTimerRequest> parse_file_timer_request(std::string_view line, std::string& problem);

class FileTimerTable {
 public:
  // Bytes as read from the pipe (lines may arrive in pieces). Returns one message per line not understood
  // ("line 3 of the timer pipe: ..."); those lines are skipped.
  std::vector<std::string> feed(std::string_view bytes);
  void apply(const FileTimerRequest& request);

  // The earliest expiration time of any timer, or nullopt when none is set.
  std::optional<double> next_expiration() const;
  // Per pid with timers due at `now` (Unix seconds): its earliest expired timer (the one to act on).
  // Every timer of those pids is removed.
  std::vector<ExpiredFileTimer> take_expired(double now);
  // Drops the timers of a pid (its process has ended).
  void forget_pid(long pid);
  std::size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<long, std::string>, FileTimerRequest> timers_;
  std::string partial_line_;
  long lines_seen_ = 0;
};

}  // namespace mgtrain
