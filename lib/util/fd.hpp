// Fd: owns one file descriptor and closes it exactly once (RAII, move-only). Every descriptor mgtrain opens
// lives in an Fd, so no error path leaks one and no descriptor is closed twice.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace mgtrain {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives up ownership: the caller closes it (or hands it to a child process).
  int release() { return std::exchange(fd_, -1); }
  // Closes the owned descriptor (if any) and owns `fd` instead.
  void reset(int fd = -1);
  // Closes the owned descriptor now and says whether close(2) succeeded (false with errno set: a deferred write
  // error, e.g. on NFS, for a file just written). EINTR counts as success: the descriptor is released anyway.
  // Afterwards the Fd owns nothing. True when it owned nothing.
  bool close();

 private:
  int fd_ = -1;
};

// Writes all of `data` to `fd`, retrying on EINTR and short writes. "" when it all went, else why it stopped
// (strerror, or "short write" for a write that wrote nothing) — for appenders that warn once and stop.
std::string write_fully(int fd, std::string_view data);

// A pipe's two ends; both close-on-exec. Throws SystemError.
struct Pipe {
  Fd read;
  Fd write;
};
Pipe make_pipe();

// The one wait for descriptors in mgtrain (ppoll): until one of the `count` descriptors of `fds` is ready (revents
// set) or `deadline` passes (nullopt: no limit). The event loop waits here, and so does every bounded read or write
// outside it. Returns how many are ready; 0 when the deadline passed or a signal interrupted the wait. Throws
// SystemError for any other failure, naming `what`.
int wait_ready(pollfd* fds, std::size_t count, std::optional<std::chrono::steady_clock::time_point> deadline,
               const char* what);

}  // namespace mgtrain
