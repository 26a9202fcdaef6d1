// Checkpoint writing in real processes (tests/support/checkpoint_write_tool.cpp): SIGKILL at ~20 instants of a
// write (test-only pause hook) always leaves a valid newest checkpoint and only stale temp files to clean, and
// disk errors (RLIMIT_FSIZE, a full tmpfs, a read-only mount) end the writer with the path and errno text
// and no partial file under the final name.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "support/checkpoint_test_data.hpp"
#include "support/directory_listing.hpp"
#include "support/temp_dir.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;
using mgtrain::testing::names_in;
using mgtrain::testing::read_all;
namespace fs = std::filesystem;

namespace {

const std::string kTool = CHECKPOINT_WRITE_TOOL_PATH;
constexpr double kMegabytes = 1.5;  // more than one 1 MiB hashing/writing piece

struct ToolOptions {
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<rlim_t> file_size_limit;  // RLIMIT_FSIZE in the child
};

// The tool running with stdout and stderr on one pipe.
struct ToolProcess {
  pid_t pid = -1;
  int output = -1;
  std::string text;  // output read so far

  ToolProcess(const std::string& dir, std::int64_t step, double megabytes, const ToolOptions& options = {}) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    const std::vector<std::string> args = {kTool, dir, std::to_string(step), std::to_string(megabytes)};
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // this test process is single-threaded, so setenv after fork is fine
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::unsetenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE");
      ::unsetenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT");
      for (const auto& [name, value] : options.env) ::setenv(name.c_str(), value.c_str(), 1);
      if (options.file_size_limit) {
        const struct rlimit limit = {*options.file_size_limit, *options.file_size_limit};
        if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(126);
      }
      std::vector<char*> argv;
      for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
      argv.push_back(nullptr);
      ::execv(kTool.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    output = fds[0];
  }
  ~ToolProcess() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (output >= 0) ::close(output);
  }

  // Reads output until it contains `marker`, the tool closes its output, or `timeout_s` passes.
  bool wait_for(const std::string& marker, double timeout_s = 60) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (text.find(marker) == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      struct pollfd poll_fd = {output, POLLIN, 0};
      if (::poll(&poll_fd, 1, static_cast<int>(left)) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(output, buffer, sizeof buffer);
      if (n == 0) return false;
      if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
    }
    return true;
  }

  // Waits for the exit (SIGKILL after `timeout_s`); returns the wait status.
  int finish(double timeout_s = 120) {
    wait_for("\x01never printed\x01", timeout_s);
    if (pid <= 0) return -1;
    int status = 0;
    ::kill(pid, SIGKILL);  // no-op when it has exited already (a zombie until waited for)
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }

  int kill_now() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
};

// Runs the tool to completion; requires success.
void write_with_tool(const fs::path& dir, std::int64_t step, double megabytes = kMegabytes) {
  ToolProcess tool(dir.string(), step, megabytes);
  const int status = tool.finish();
  INFO(tool.text);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

// Puts this test process into a mount namespace of its own, once, with private propagation so nothing mounted
// here is seen outside it. Returns "" or why that is not possible on this machine.
std::string enter_private_mount_namespace() {
  static const std::string why_not = []() -> std::string {
    if (::unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return std::string("making mounts private: ") + std::strerror(errno);
    }
    return "";
  }();
  return why_not;
}

}  // namespace

TEST_CASE("checkpoint writer SIGKILLed at any instant leaves a valid newest checkpoint", "[checkpoint][process]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-kill-run");
  const fs::path dir = temp_dir.path();
  const testing::TempDir temp_reference_dir("mgtrain-ckpt-kill-reference");
  const fs::path reference_dir = temp_reference_dir.path();
  write_with_tool(dir, 1);
  write_with_tool(reference_dir, 2);
  const std::string name1 = checkpoint_file_name(1), name2 = checkpoint_file_name(2);
  const std::string reference = read_all(reference_dir / name2);
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i)
    header_size = header_size << 8 | static_cast<unsigned char>(reference[static_cast<std::size_t>(i)]);
  // What the temp file holds before the final checksum digits are written: the digits are '0's.
  std::string reference_with_zero_digits = reference;
  reference_with_zero_digits.replace(8 + kChecksumDigitsOffsetInHeader, 16, 16, '0');

  const std::uint64_t size = reference.size(), data_start = 8 + header_size, mib = 1 << 20;
  const std::vector<std::uint64_t> byte_points = {0,
                                                  1,
                                                  4,
                                                  7,
                                                  8,
                                                  9,  // the 8-byte length
                                                  8 + kChecksumDigitsOffsetInHeader + 5,
                                                  8 + header_size / 2,  // inside the JSON header
                                                  data_start - 1,
                                                  data_start,
                                                  data_start + 1,
                                                  data_start + 4099,  // first data bytes
                                                  data_start + mib - 1,
                                                  data_start + mib,
                                                  data_start + mib + 1,  // around a write piece boundary
                                                  data_start + (size - data_start) / 2,
                                                  size - 4096,
                                                  size - 1,
                                                  size};  // middle, last bytes, all bytes
  std::vector<std::string> points;
  for (std::uint64_t byte : byte_points) points.push_back(std::to_string(byte));
  for (const char* stage : {"before-fsync", "before-rename", "before-dir-fsync"}) points.push_back(stage);
  const testing::TestCheckpoint expected1 = testing::make_test_checkpoint(1, kMegabytes);
  const testing::TestCheckpoint expected2 = testing::make_test_checkpoint(2, kMegabytes);

  for (const std::string& point : points) {
    const bool at_byte = std::isdigit(static_cast<unsigned char>(point[0])) != 0;
    INFO("paused and killed at " << point);
    ToolOptions options;
    options.env = {{at_byte ? "MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE" : "MGTRAIN_TEST_CHECKPOINT_PAUSE_AT", point}};
    ToolProcess tool(dir.string(), 2, kMegabytes, options);
    const pid_t pid = tool.pid;
    const bool paused =
        tool.wait_for("mgtrain-test: checkpoint write paused at " + std::string(at_byte ? "byte " : "") + point + "\n");
    const int status = tool.kill_now();
    INFO("tool output: " << tool.text);
    REQUIRE(paused);
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));

    const std::string temp_name = ".checkpoint-step000000002.safetensors.tmp." + std::to_string(pid);
    const bool renamed = point == "before-dir-fsync";
    if (at_byte) {  // the temp file holds exactly the first N bytes
      const std::uint64_t n = std::stoull(point);
      CHECK(read_all(dir / temp_name) == reference_with_zero_digits.substr(0, n));
    } else if (!renamed) {
      CHECK(read_all(dir / temp_name) == reference);
    } else {
      CHECK(read_all(dir / name2) == reference);
    }

    const NewestValidCheckpoint newest = newest_valid_checkpoint(dir.string());
    REQUIRE(newest.chosen);
    CHECK(newest.chosen->step == (renamed ? 2 : 1));
    CHECK(newest.notes.empty());
    CHECK(testing::compare_with_checkpoint(read_checkpoint_file(newest.chosen->path),
                                           renamed ? expected2 : expected1) == "");
    CHECK(read_latest_pointer(dir.string()) == name1);

    CHECK(remove_stale_temp_files(dir.string()) ==
          (renamed ? std::vector<std::string>{} : std::vector<std::string>{temp_name}));
    CHECK(names_in(dir) ==
          (renamed ? std::vector<std::string>{name1, name2, "latest"} : std::vector<std::string>{name1, "latest"}));
    fs::remove(dir / name2);
  }

  // Undisturbed writes go on: step 2, then step 3 prunes step 1 (keep_last 2).
  write_with_tool(dir, 2);
  write_with_tool(dir, 3);
  CHECK(names_in(dir) == std::vector<std::string>{name2, checkpoint_file_name(3), "latest"});
  CHECK(read_latest_pointer(dir.string()) == checkpoint_file_name(3));
  CHECK(newest_valid_checkpoint(dir.string()).chosen->step == 3);
}

TEST_CASE("checkpoint writer over RLIMIT_FSIZE fails naming the temp file and File too large",
          "[checkpoint][process][disk]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-disk-fsize");
  const fs::path dir = temp_dir.path();
  write_with_tool(dir, 1, 0.01);
  ToolOptions options;
  options.file_size_limit = 64 * 1024;
  ToolProcess tool(dir.string(), 2, 1.0, options);
  const pid_t pid = tool.pid;
  const int status = tool.finish();
  INFO(tool.text);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));  // not killed by SIGXFSZ
  CHECK_THAT(tool.text, Contains("checkpoint_write_tool: error: write " +
                                 (dir / ".checkpoint-step000000002.safetensors.tmp.").string() + std::to_string(pid) +
                                 ": File too large"));
  CHECK(names_in(dir) == std::vector<std::string>{checkpoint_file_name(1), "latest"});
  CHECK(newest_valid_checkpoint(dir.string()).chosen->step == 1);
}

TEST_CASE("checkpoint writer on a full file system (1 MiB tmpfs) fails naming the temp file and ENOSPC",
          "[checkpoint][process][disk]") {
  const std::string why_not = enter_private_mount_namespace();
  if (!why_not.empty()) {
    WARN("SKIP: cannot mount a tiny tmpfs on this machine (" << why_not << ")");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-ckpt-disk-enospc");
  const fs::path dir = temp_dir.path();
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0) {
    WARN("SKIP: mount -t tmpfs -o size=1m: " << std::strerror(errno));
    return;
  }
  write_with_tool(dir, 1, 0.25);
  ToolProcess tool(dir.string(), 2, 4.0);
  const pid_t pid = tool.pid;
  const int status = tool.finish();
  INFO(tool.text);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));
  CHECK_THAT(tool.text, Contains("checkpoint_write_tool: error: write " +
                                 (dir / ".checkpoint-step000000002.safetensors.tmp.").string() + std::to_string(pid) +
                                 ": No space left on device"));
  CHECK(names_in(dir) == std::vector<std::string>{checkpoint_file_name(1), "latest"});
  CHECK(newest_valid_checkpoint(dir.string()).chosen->step == 1);
  ::umount2(dir.c_str(), MNT_DETACH);
}

TEST_CASE("checkpoint writer on a read-only mount fails naming the temp file and EROFS",
          "[checkpoint][process][disk]") {
  const std::string why_not = enter_private_mount_namespace();
  if (!why_not.empty()) {
    WARN("SKIP: cannot make a read-only bind mount on this machine (" << why_not << ")");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-ckpt-disk-erofs");
  const fs::path dir = temp_dir.path();
  write_with_tool(dir, 1, 0.01);
  if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    WARN("SKIP: read-only bind mount: " << std::strerror(errno));
    ::umount2(dir.c_str(), MNT_DETACH);
    return;
  }
  ToolProcess tool(dir.string(), 2, 0.01);
  const pid_t pid = tool.pid;
  const int status = tool.finish();
  INFO(tool.text);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));
  CHECK_THAT(tool.text, Contains("checkpoint_write_tool: error: create " +
                                 (dir / ".checkpoint-step000000002.safetensors.tmp.").string() + std::to_string(pid) +
                                 ": Read-only file system"));
  CHECK(names_in(dir) == std::vector<std::string>{checkpoint_file_name(1), "latest"});
  ::umount2(dir.c_str(), MNT_DETACH);
}
