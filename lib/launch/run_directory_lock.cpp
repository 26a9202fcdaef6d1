// RunDirectoryLock: the flock on <run_dir>/launcher.lock and the refusal naming its holder (see
// run_directory_lock.hpp).
#include "launch/run_directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "contract/log_layout.hpp"
#include "supervise/run_directory.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

// What the holder wrote: "pid <pid>\nhost <host>\n".
struct Holder {
  std::string pid;
  std::string host;
};

Holder parse_holder(const std::string& text) {
  Holder holder;
  for (const std::string& line : split_lines(text)) {
    if (starts_with(line, "pid ")) holder.pid = line.substr(4);
    if (starts_with(line, "host ")) holder.host = line.substr(5);
  }
  return holder;
}

// The holder of the lock on `fd`'s file. It writes its pid right after it took the lock, so an empty file is
// read again for a short while.
Holder read_holder(int fd) {
  Holder holder;
  for (int tries = 0; tries < 50; ++tries) {
    char buffer[512];
    const ssize_t got = pread(fd, buffer, sizeof buffer, 0);
    if (got > 0) holder = parse_holder(std::string(buffer, static_cast<std::size_t>(got)));
    if (!holder.pid.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return holder;
}

std::string held_message(const std::string& path, const std::string& run_id, const Holder& holder,
                         const std::string& hostname) {
  const std::string who = holder.pid.empty() ? "another launcher"
                                             : fmt::format("the launcher with pid {} on host {}", holder.pid,
                                                           holder.host.empty() ? "(unknown)" : holder.host);
  std::string message = fmt::format(
      "run {} is in use: {} is still running it (it holds {}); a second launch would move its logs away and write "
      "the same checkpoints. Wait for it to end or stop it, or choose another run id with --run-id",
      run_id, who, path);
  if (!holder.host.empty() && holder.host != hostname) {
    message +=
        fmt::format(". If host {} is down for good, a file server may keep its lock: delete {} to take the run over",
                    holder.host, path);
  }
  return message;
}

}  // namespace

RunDirectoryLock::RunDirectoryLock(const std::string& run_dir, const std::string& run_id, const std::string& hostname) {
  create_run_directory(run_dir);
  const std::string path = log_layout::launcher_lock(run_dir);
  Fd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644));
  if (!fd) {
    throw Error("cannot open " + path + ": " + std::strerror(errno) +
                ": choose a writable directory with --log-dir (launch.log_dir)");
  }
  int locked;
  while ((locked = flock(fd.get(), LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {}
  if (locked != 0) {
    if (errno == EWOULDBLOCK) throw UsageError(held_message(path, run_id, read_holder(fd.get()), hostname));
    log::warn("cannot lock {} ({}): a second launch with run id {} would not be refused while this one runs", path,
              std::strerror(errno), run_id);
    return;
  }
  // Written in place (never replaced: a new file would be a new lock); a failed write leaves the lock held.
  if (ftruncate(fd.get(), 0) == 0) write_fully(fd.get(), fmt::format("pid {}\nhost {}\n", getpid(), hostname));
  fd_ = std::move(fd);
}

}  // namespace mgtrain
