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
#include <thread>

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

// The Python half: signal the armed interpreter and collect what faulthandler appended. "" with a note when not.
std::string python_stacks(const DumpTarget& target, Clock::time_point deadline, std::vector<std::string>& notes) {
  const std::string name = who(target);
  if (target.faulthandler_path.empty()) {
    notes.push_back(name + ": no Python frames: the process was not started with mgtrain's stack-dump hook");
    return "";
  }
  const int signal_number = stack_signal();
  if (!catches_signal(target.pid, signal_number)) {
    notes.push_back(name + ": no Python frames: the process does not catch the stack signal " +
                    std::to_string(signal_number) +
                    " (the hook did not run: python -E, -I or -S, a PYTHONPATH replaced by the program, or "
                    "not a Python interpreter), so it was not sent");
    return "";
  }
  const long long before = std::max(0LL, file_size(target.faulthandler_path));
  if (kill(target.pid, signal_number) != 0) {
    notes.push_back(name + ": no Python frames: cannot signal it: " + std::strerror(errno));
    return "";
  }
  const auto signalled = Clock::now();
  const auto limit = std::min(deadline, signalled + kPythonWaitLimit);
  long long seen = before;
  auto last_growth = Clock::now();
  while (Clock::now() < limit) {
    const long long size = file_size(target.faulthandler_path);
    const auto now = Clock::now();
    if (size > seen) {
      seen = size;
      last_growth = now;
    } else if (seen > before && now - last_growth >= kQuietAfterDump) {
      return read_from(target.faulthandler_path, before);
    }
    std::this_thread::sleep_for(kPoll);
  }
  if (seen > before) {
    notes.push_back(name + ": the Python dump may be cut short: it was still growing at the deadline");
    return read_from(target.faulthandler_path, before);
  }
  notes.push_back(name + ": no Python frames within " + format_seconds(seconds_between(signalled, Clock::now())) +
                  ": the stack signal was sent but not handled (blocked by the program, or the process is in an "
                  "uninterruptible wait)");
  return "";
}

// The native half: eu-stack -p PID, bounded by the deadline; a process it leaves stopped is continued.
std::string native_stacks(const DumpTarget& target, Clock::time_point deadline, const DumpOptions& options,
                          std::vector<std::string>& notes) {
  const std::string name = who(target);
  if (options.eu_stack.empty()) {
    notes.push_back(name + ": no native frames: eu-stack is turned off");
    return "";
  }
  const char* path_variable = std::getenv("PATH");
  const std::string eu_stack = find_program(options.eu_stack, path_variable ? path_variable : "");
  if (eu_stack.empty()) {
    notes.push_back(name + ": no native frames: " + options.eu_stack +
                    " not found (Debian/Ubuntu: apt install elfutils; Fedora: dnf install elfutils)");
    return "";
  }
  const double budget = seconds_between(Clock::now(), deadline - kWriteReserve);
  if (budget <= 0.05) {
    notes.push_back(name + ": no native frames: the deadline left no time for eu-stack");
    return "";
  }
  const auto state_before = process_state(target.pid);
  CaptureOptions capture;
  capture.timeout_s = budget;
  CapturedRun run;
  try {
    run = run_and_capture(
        {eu_stack, "-p", std::to_string(target.pid), "-n", std::to_string(options.max_frames_per_thread)}, capture);
  } catch (const std::exception& error) {
    notes.push_back(name + ": no native frames: " + error.what());
    return "";
  }
  const auto state_after = process_state(target.pid);
  if (state_after && is_stopped_state(*state_after) && !(state_before && is_stopped_state(*state_before))) {
    kill(target.pid, SIGCONT);  // eu-stack was killed while attached: do not leave the worker stopped
  }
  if (run.timed_out) {
    notes.push_back(name + ": native frames cut short: eu-stack did not finish within " + format_seconds(budget) +
                    " (the deadline)");
    return run.out;
  }
  if (run.out.find("TID ") == std::string::npos) {
    std::string why = run.err.substr(0, run.err.find('\n'));
    if (why.empty()) why = "exit code " + std::to_string(run.exit_code);
    std::string obstacle = ptrace_obstacle_here();
    notes.push_back(name + ": no native frames: eu-stack: " + why + (obstacle.empty() ? "" : "; " + obstacle));
    return "";
  }
  if (run.exit_code != 0) {
    notes.push_back(name + ": some native frames could not be unwound (eu-stack exit " + std::to_string(run.exit_code) +
                    ")");
  }
  return run.out;
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

DumpResult dump_stacks(const DumpTarget& target, Clock::time_point deadline, const DumpOptions& options) {
  const auto started = Clock::now();
  DumpResult result;
  const std::string name = who(target);
  std::string python, native;
  const auto state = process_state(target.pid);
  if (!state || *state == 'Z') {
    result.notes.push_back(name + ": no stacks: the process has ended");
  } else {
    if (target.kind == ProgramKind::python) {
      if (is_stopped_state(*state)) {
        result.notes.push_back(name +
                               ": no Python frames: the process is stopped (SIGSTOP or a debugger), so it "
                               "cannot run faulthandler; native frames only");
      } else {
        python = python_stacks(target, deadline, result.notes);
      }
    }
    native = native_stacks(target, deadline, options, result.notes);
  }
  result.python_frames = !python.empty();
  result.native_frames = !native.empty();
  const bool wanted_all = result.native_frames && (target.kind != ProgramKind::python || result.python_frames);
  result.outcome = wanted_all && result.notes.empty()             ? DumpOutcome::complete
                   : result.python_frames || result.native_frames ? DumpOutcome::partial
                                                                  : DumpOutcome::failed;

  std::string text = "# mgtrain stacks of " + name + ", " + kind_name(target.kind) + ", taken " +
                     format_utc_millis(unix_millis_now()) + "\n";
  if (!python.empty()) {
    text += "\n== Python (faulthandler; most recent call first) ==\n" + python;
    if (text.back() != '\n') text += '\n';
  }
  if (!native.empty()) {
    text += "\n== native (eu-stack) ==\n" + native;
    if (text.back() != '\n') text += '\n';
  }
  if (!result.notes.empty()) {
    text += "\n== notes ==\n";
    for (const auto& note : result.notes) text += note + "\n";
  }
  try {
    AtomicFileWriter writer(target.output_path);
    writer.write(text.data(), text.size());
    writer.commit();
    result.output_path = target.output_path;
    result.top_frames = top_frames(text);
  } catch (const std::exception& error) {
    result.notes.push_back(name + ": stacks not saved: " + error.what());
    result.outcome = DumpOutcome::failed;
  }
  result.seconds = seconds_between(started, Clock::now());
  return result;
}

std::vector<DumpResult> dump_stacks_all(const std::vector<DumpTarget>& targets, Clock::time_point deadline,
                                        const DumpOptions& options) {
  std::vector<DumpResult> results(targets.size());
  std::vector<std::thread> threads;
  threads.reserve(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        results[i] = dump_stacks(targets[i], deadline, options);
      } catch (const std::exception& error) {  // bad_alloc and the like: one rank's dump, not the caller, fails
        results[i].notes.push_back("pid " + std::to_string(targets[i].pid) + ": stack dump failed: " + error.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

}  // namespace mgtrain::diagnose
