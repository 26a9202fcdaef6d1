// The launcher's side of torch's file timer: the named pipe (TORCHELASTIC_TIMER_FILE) that workers'
// FileTimerClient write requests into, read without blocking inside the supervisor's ppoll loop, and the
// timer table (file_timer_table.hpp) it feeds. Enabled like torchrun's agent: TORCHELASTIC_ENABLE_FILE_TIMER=1
// in the launcher's environment; the pipe is TORCHELASTIC_TIMER_FILE when that is set too.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "elastic/file_timer_table.hpp"
#include "util/environment.hpp"
#include "util/fd.hpp"

namespace mgtrain {

// Where the file timer's pipe goes for this run, or "" when the environment does not enable it.
// `run_id` and the launcher's pid make the default name unique: $TMPDIR (or /tmp)/mgtrain_timer_<run_id>_<pid>.
std::string file_timer_path(const EnvMap& environment, const std::string& run_id);

class FileTimerPipe {
 public:
  // Creates the named pipe (an existing pipe at `path` is reused; anything else there is an error) and opens
  // it for reading; it is removed again on destruction when this object created it. Throws UsageError.
  explicit FileTimerPipe(std::string path);
  ~FileTimerPipe();
  FileTimerPipe(const FileTimerPipe&) = delete;
  FileTimerPipe& operator=(const FileTimerPipe&) = delete;

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // Everything the pipe holds now (never blocks).
  std::string read_available();

 private:
  std::string path_;
  bool created_ = false;
  Fd fd_;
};

// Pipe + table + wall clock: what the supervisor polls. `wall_now` is Unix seconds (the clock torch's
// clients compute expiration times with); replaceable in tests.
class FileTimerWatch {
 public:
  explicit FileTimerWatch(std::string path, std::function<double()> wall_now = {});
  int fd() const { return pipe_.fd(); }
  const std::string& path() const { return pipe_.path(); }
  // Reads what arrived; returns the lines not understood.
  std::vector<std::string> on_readable();
  // When the next timer expires, on the steady clock.
  std::optional<std::chrono::steady_clock::time_point> next_deadline(std::chrono::steady_clock::time_point now) const;
  std::vector<ExpiredFileTimer> take_expired() { return table_.take_expired(wall_now_()); }
  void forget_pid(long pid) { table_.forget_pid(pid); }

 private:
  FileTimerPipe pipe_;
  FileTimerTable table_;
  std::function<double()> wall_now_;
};

}  // namespace mgtrain
