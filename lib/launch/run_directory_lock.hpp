// RunDirectoryLock: a launcher's claim on its run directory (<log_dir>/<run_id>/) for as long as it lives. It holds
// an flock(2) on log_layout::launcher_lock(run_dir) with its pid and host written inside; a second launch with the
// same run id finds the lock held and is refused (UsageError, exit 2) before it touches anything of the live run.
// The kernel drops the lock when its holder dies (even by SIGKILL), so a stale folder is taken over without any
// guessing from pids. The descriptor is close-on-exec: workers never hold it. On a shared filesystem the lock
// reaches other hosts only where that filesystem passes flock to a lock manager (NFS does); docs/launch.md.
#pragma once

#include <string>

#include "util/fd.hpp"

namespace mgtrain {

class RunDirectoryLock {
 public:
  // Creates `run_dir` if needed and takes its lock, writing this process's pid and `hostname` into the file.
  // Throws UsageError naming the holder's pid and host when another process holds it, Error when the directory
  // cannot be created or the file opened. Where the filesystem cannot lock at all, warns and holds nothing.
  RunDirectoryLock(const std::string& run_dir, const std::string& run_id, const std::string& hostname);

  // Whether a lock is held (false where the filesystem could not lock).
  bool held() const { return fd_.valid(); }

 private:
  Fd fd_;
};

}  // namespace mgtrain
