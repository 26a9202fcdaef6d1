// Stack dumps of running processes: faulthandler for Python frames, eu-stack for native ones (see stack_dump.hpp).
#include "diagnose/stack_dump.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "diagnose/python_hook.hpp"
#include "diagnose/top_frames.hpp"
#include "process/run_capture.hpp"
#include "util/atomic_file.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain::diagnose {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(5);
// faulthandler writes a dump in one burst from its signal handler; this long without growth means it is done.
constexpr auto kQuietAfterDump = std::chrono::milliseconds(40);
// The longest wait for faulthandler's answer: it comes at once unless the signal cannot be delivered (blocked in
// every thread, uninterruptible sleep), and the rest of the time is eu-stack's.
constexpr auto kPythonWaitLimit = std::chrono::seconds(2);
// Kept back from the deadline for writing stacks.txt.
constexpr auto kWriteReserve = std::chrono::milliseconds(30);

std::string who(const DumpTarget& target) {
  std::string text = target.rank >= 0 ? "rank " + std::to_string(target.rank) + " (pid " : "pid ";
  text += std::to_string(target.pid);
  if (target.rank >= 0) text += ")";
  return text;
}

long long file_size(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 ? static_cast<long long>(info.st_size) : -1;
}

std::string read_from(const std::string& path, long long offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(offset);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const char* kind_name(ProgramKind kind) { return kind == ProgramKind::python ? "python" : "native"; }

}  // namespace

std::string find_program(const std::string& program, const std::string& path_variable) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  std::istringstream folders(path_variable);
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    if (folder.empty()) folder = ".";
    std::string candidate = folder + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

StackDump::StackDump(DumpTarget target, Clock::time_point deadline, DumpOptions options)
    : target_(std::move(target)),
      deadline_(deadline),
      options_(std::move(options)),
      name_(who(target_)),
      started_(Clock::now()) {
  const std::optional<char> state = process_state(target_.pid);
  if (!state || *state == 'Z') {
    result_.notes.push_back(name_ + ": no stacks: the process has ended");
    finish();
  } else if (target_.kind != ProgramKind::python) {
    start_native();
  } else if (is_stopped_state(*state)) {
    result_.notes.push_back(name_ +
                            ": no Python frames: the process is stopped (SIGSTOP or a debugger), so it cannot run "
                            "faulthandler; native frames only");
    start_native();
  } else {
    start_python();
  }
}

StackDump::~StackDump() {
  if (!eu_stack_ || eu_stack_->done()) return;
  eu_stack_.reset();  // killed and reaped
  continue_if_left_stopped();
}

// eu-stack killed while attached leaves its target stopped: continue it, unless it was stopped before eu-stack ran.
void StackDump::continue_if_left_stopped() const {
  const std::optional<char> state_after = process_state(target_.pid);
  if (state_after && is_stopped_state(*state_after) &&
      !(state_before_native_ && is_stopped_state(*state_before_native_))) {
    kill(target_.pid, SIGCONT);
  }
}

// The Python half: signal the armed interpreter, then watch what faulthandler appends (python_answered).
void StackDump::start_python() {
  if (target_.faulthandler_path.empty()) {
    result_.notes.push_back(name_ + ": no Python frames: the process was not started with mgtrain's stack-dump hook");
    return start_native();
  }
  const int signal_number = stack_signal();
  if (!catches_signal(target_.pid, signal_number)) {
    result_.notes.push_back(name_ + ": no Python frames: the process does not catch the stack signal " +
                            std::to_string(signal_number) +
                            " (the hook did not run: python -E, -I or -S, a PYTHONPATH replaced by the program, or "
                            "not a Python interpreter), so it was not sent");
    return start_native();
  }
  size_before_ = std::max(0LL, file_size(target_.faulthandler_path));
  size_seen_ = size_before_;
  if (kill(target_.pid, signal_number) != 0) {
    result_.notes.push_back(name_ + ": no Python frames: cannot signal it: " + std::strerror(errno));
    return start_native();
  }
  signalled_ = Clock::now();
  last_growth_ = signalled_;
  python_limit_ = std::min(deadline_, signalled_ + kPythonWaitLimit);
}

void StackDump::python_answered(LoopTime now) {
  if (size_seen_ > size_before_) {
    python_ = read_from(target_.faulthandler_path, size_before_);
    if (now >= python_limit_ && now - last_growth_ < kQuietAfterDump) {
      result_.notes.push_back(name_ + ": the Python dump may be cut short: it was still growing at the deadline");
    }
  } else {
    result_.notes.push_back(name_ + ": no Python frames within " + format_seconds(seconds_between(signalled_, now)) +
                            ": the stack signal was sent but not handled (blocked by the program, or the process is "
                            "in an uninterruptible wait)");
  }
  start_native();
}

// The native half: eu-stack -p PID, bounded by the deadline (native_answered).
void StackDump::start_native() {
  stage_ = Stage::kNative;
  if (options_.eu_stack.empty()) {
    result_.notes.push_back(name_ + ": no native frames: eu-stack is turned off");
    return finish();
  }
  const char* path_variable = std::getenv("PATH");
  const std::string eu_stack = find_program(options_.eu_stack, path_variable ? path_variable : "");
  if (eu_stack.empty()) {
    result_.notes.push_back(name_ + ": no native frames: " + options_.eu_stack +
                            " not found (Debian/Ubuntu: apt install elfutils; Fedora: dnf install elfutils)");
    return finish();
  }
  native_budget_s_ = seconds_between(Clock::now(), deadline_ - kWriteReserve);
  if (native_budget_s_ <= 0.05) {
    result_.notes.push_back(name_ + ": no native frames: the deadline left no time for eu-stack");
    return finish();
  }
  state_before_native_ = process_state(target_.pid);
  CaptureOptions capture;
  capture.timeout_s = native_budget_s_;
  try {
    eu_stack_ = std::make_unique<HelperRun>(std::vector<std::string>{eu_stack, "-p", std::to_string(target_.pid), "-n",
                                                                     std::to_string(options_.max_frames_per_thread)},
                                            capture);
  } catch (const std::exception& error) {
    result_.notes.push_back(name_ + ": no native frames: " + error.what());
    finish();
  }
}

void StackDump::native_answered() {
  const CapturedRun& run = eu_stack_->result();
  continue_if_left_stopped();
  if (run.timed_out) {
    result_.notes.push_back(name_ + ": native frames cut short: eu-stack did not finish within " +
                            format_seconds(native_budget_s_) + " (the deadline)");
    native_ = run.out;
  } else if (run.out.find("TID ") == std::string::npos) {
    std::string why = run.err.substr(0, run.err.find('\n'));
    if (why.empty()) why = "exit code " + std::to_string(run.exit_code);
    const std::string obstacle = ptrace_obstacle_here();
    result_.notes.push_back(name_ + ": no native frames: eu-stack: " + why + (obstacle.empty() ? "" : "; " + obstacle));
  } else {
    if (run.exit_code != 0) {
      result_.notes.push_back(name_ + ": some native frames could not be unwound (eu-stack exit " +
                              std::to_string(run.exit_code) + ")");
    }
    native_ = run.out;
  }
  finish();
}

void StackDump::add_fds(std::vector<pollfd>& fds) {
  if (eu_stack_ && !eu_stack_->done()) eu_stack_->add_fds(fds);
}

void StackDump::on_ready(const pollfd& ready, LoopTime now) {
  if (eu_stack_ && !eu_stack_->done()) eu_stack_->on_ready(ready, now);
}

std::optional<LoopTime> StackDump::next_deadline() const {
  if (stage_ == Stage::kPython) return std::min(Clock::now() + kPoll, python_limit_);
  if (stage_ == Stage::kNative && eu_stack_ && !eu_stack_->done()) return eu_stack_->next_deadline();
  return std::nullopt;
}

void StackDump::on_time(LoopTime now) {
  if (stage_ == Stage::kPython) {
    const long long size = file_size(target_.faulthandler_path);
    if (size > size_seen_) {
      size_seen_ = size;
      last_growth_ = now;
    } else if (size_seen_ > size_before_ && now - last_growth_ >= kQuietAfterDump) {
      return python_answered(now);
    }
    if (now >= python_limit_) python_answered(now);
    return;
  }
  if (stage_ != Stage::kNative || !eu_stack_ || eu_stack_->done()) return;
  eu_stack_->on_time(now);
  if (eu_stack_->done()) native_answered();
}

void StackDump::finish() {
  stage_ = Stage::kDone;
  result_.python_frames = !python_.empty();
  result_.native_frames = !native_.empty();
  const bool wanted_all = result_.native_frames && (target_.kind != ProgramKind::python || result_.python_frames);
  result_.outcome = wanted_all && result_.notes.empty()              ? DumpOutcome::complete
                    : result_.python_frames || result_.native_frames ? DumpOutcome::partial
                                                                     : DumpOutcome::failed;

  std::string text = "# mgtrain stacks of " + name_ + ", " + kind_name(target_.kind) + ", taken " +
                     format_utc_millis(unix_millis_now()) + "\n";
  if (!python_.empty()) {
    text += "\n== Python (faulthandler; most recent call first) ==\n" + python_;
    if (text.back() != '\n') text += '\n';
  }
  if (!native_.empty()) {
    text += "\n== native (eu-stack) ==\n" + native_;
    if (text.back() != '\n') text += '\n';
  }
  if (!result_.notes.empty()) {
    text += "\n== notes ==\n";
    for (const auto& note : result_.notes) text += note + "\n";
  }
  try {
    AtomicFileWriter writer(target_.output_path);
    writer.write(text.data(), text.size());
    writer.commit();
    result_.output_path = target_.output_path;
    result_.top_frames = top_frames(text);
  } catch (const std::exception& error) {
    result_.notes.push_back(name_ + ": stacks not saved: " + error.what());
    result_.outcome = DumpOutcome::failed;
  }
  result_.seconds = seconds_between(started_, Clock::now());
}

}  // namespace mgtrain::diagnose
