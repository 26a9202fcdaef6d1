// RunDirectoryLock in one process (flock conflicts between two open descriptions of the file, as between two
// launchers): the folder made, the holder written, a second lock refused naming the holder, the lock released
// with its owner, and a descriptor that workers do not inherit. Launchers as processes: tests/integration.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "launch/run_directory_lock.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The flags of this process's descriptor open on `path`, or -1 when none is.
int descriptor_flags(const std::string& path) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const auto target = std::filesystem::read_symlink(entry.path(), error);
    if (!error && target == path) return fcntl(std::stoi(entry.path().filename().string()), F_GETFD);
  }
  return -1;
}

}  // namespace

TEST_CASE("a run directory lock: one holder, named to the next, released with its owner", "[run_directory_lock]") {
  testing::TempDir dir;
  const std::string run_dir = dir / "runs/one";
  const std::string lock_file = run_dir + "/launcher.lock";
  std::optional<RunDirectoryLock> first;
  first.emplace(run_dir, "one", "node-a");
  REQUIRE(first->held());
  CHECK(file_text(lock_file) == "pid " + std::to_string(getpid()) + "\nhost node-a\n");
  const int flags = descriptor_flags(lock_file);
  REQUIRE(flags >= 0);
  CHECK((flags & FD_CLOEXEC) != 0);

  // Another launcher on the same host: refused with exit 2, naming the holder and the lock file.
  try {
    RunDirectoryLock second(run_dir, "one", "node-a");
    FAIL("the second lock was taken");
  } catch (const UsageError& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::Contains("run one is in use") &&
                            Catch::Contains("pid " + std::to_string(getpid()) + " on host node-a") &&
                            Catch::Contains(lock_file) && !Catch::Contains("is down"));
  }
  // One on another host (a shared filesystem): the message says what to do if the holder's host is gone.
  CHECK_THROWS_WITH(RunDirectoryLock(run_dir, "one", "node-b"),
                    Catch::Contains("on host node-a") && Catch::Contains("If host node-a is down for good"));
  CHECK(file_text(lock_file) == "pid " + std::to_string(getpid()) + "\nhost node-a\n");  // the holder's, untouched

  first.reset();
  RunDirectoryLock third(run_dir, "one", "node-c");
  CHECK(third.held());
  CHECK(file_text(lock_file) == "pid " + std::to_string(getpid()) + "\nhost node-c\n");
}

TEST_CASE("a run directory lock where the directory cannot be made is a clear error", "[run_directory_lock]") {
  testing::TempDir dir;
  std::ofstream(dir / "file").put('x');
  CHECK_THROWS_WITH(RunDirectoryLock(dir / "file/run", "run", "host"),
                    Catch::Contains("cannot create run directory " + dir / "file/run") && Catch::Contains("--log-dir"));
}
