// The file timer's named pipe and clock.
#include "elastic/file_timer_pipe.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "util/error.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

std::string file_timer_path(const EnvMap& environment, const std::string& run_id) {
  auto enabled = environment.find("TORCHELASTIC_ENABLE_FILE_TIMER");
  if (enabled == environment.end() || enabled->second != "1") return "";
  auto named = environment.find("TORCHELASTIC_TIMER_FILE");
  if (named != environment.end() && !named->second.empty()) return named->second;
  auto tmpdir = environment.find("TMPDIR");
  std::string directory = tmpdir != environment.end() && !tmpdir->second.empty() ? tmpdir->second : "/tmp";
  return directory + "/mgtrain_timer_" + run_id + "_" + std::to_string(getpid());
}

FileTimerPipe::FileTimerPipe(std::string path) : path_(std::move(path)) {
  const std::string where = "the file timer's pipe " + path_ + " (TORCHELASTIC_TIMER_FILE)";
  if (mkfifo(path_.c_str(), 0600) == 0) {
    created_ = true;
  } else if (errno == EEXIST) {
    struct stat info {};
    if (stat(path_.c_str(), &info) != 0 || !S_ISFIFO(info.st_mode)) {
      throw UsageError(where + " exists and is not a named pipe: remove it or name another path");
    }
  } else {
    throw UsageError("cannot create " + where + ": " + std::string(strerror(errno)) +
                     ": set TORCHELASTIC_TIMER_FILE to a path in a writable directory");
  }
  // Read and write: the pipe never reports end-of-file between clients, and clients' non-blocking opens succeed.
  fd_ = Fd(open(path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd_) {
    int error = errno;
    if (created_) unlink(path_.c_str());
    throw SystemError("open(" + path_ + ")", error);
  }
}

FileTimerPipe::~FileTimerPipe() {
  if (created_) unlink(path_.c_str());
}

std::string FileTimerPipe::read_available() {
  std::string data;
  char buffer[4096];
  for (;;) {
    ssize_t got = read(fd_.get(), buffer, sizeof buffer);
    if (got > 0) {
      data.append(buffer, static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return data;  // EAGAIN: nothing more for now
  }
}

FileTimerWatch::FileTimerWatch(std::string path, std::function<double()> wall_now)
    : pipe_(std::move(path)), wall_now_(std::move(wall_now)) {
  if (!wall_now_) wall_now_ = unix_seconds_now;
}

std::vector<std::string> FileTimerWatch::on_readable() { return table_.feed(pipe_.read_available()); }

std::optional<std::chrono::steady_clock::time_point> FileTimerWatch::next_deadline(
    std::chrono::steady_clock::time_point now) const {
  std::optional<double> expiration = table_.next_expiration();
  if (!expiration) return std::nullopt;
  double wait_s = std::max(0.0, *expiration - wall_now_());
  wait_s = std::min(wait_s, 3600.0);  // a wall clock step is noticed within the hour at worst
  return now + steady_seconds(wait_s);
}

}  // namespace mgtrain
