// Fd and Pipe (see fd.hpp).
#include "util/fd.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "util/error.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

void Fd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);  // close(2) releases the descriptor even when it reports EINTR
  fd_ = fd;
}

bool Fd::close() {
  const int fd = release();
  if (fd < 0) return true;
  return ::close(fd) == 0 || errno == EINTR;
}

std::string write_fully(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return std::strerror(errno);
    if (written == 0) return "short write";
    data.remove_prefix(static_cast<std::size_t>(written));
  }
  return "";
}

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError("pipe2", errno);
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

int wait_ready(pollfd* fds, std::size_t count, std::optional<std::chrono::steady_clock::time_point> deadline,
               const char* what) {
  timespec timeout{};
  if (deadline) timeout = to_timespec(*deadline - std::chrono::steady_clock::now());
  const int ready = ppoll(fds, count, deadline ? &timeout : nullptr, nullptr);
  if (ready < 0 && errno != EINTR) throw SystemError(std::string("ppoll() ") + what, errno);
  return ready < 0 ? 0 : ready;
}

}  // namespace mgtrain
