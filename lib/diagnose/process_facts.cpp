// Reading /proc for the stack dump: state, caught signals, program kind, ptrace permission (see process_facts.hpp).
#include "diagnose/process_facts.hpp"
#include "host/process_stats.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <sstream>

#include "util/file_io.hpp"
#include "util/strings.hpp"

namespace mgtrain::diagnose {

namespace {

// The value of "Name:\t..." in /proc/<pid>/status, or "".
std::string status_field(const std::string& status, const std::string& name) {
  for (const auto& line : split_lines(status)) {
    if (starts_with(line, name + ":")) {
      std::string value = line.substr(name.size() + 1);
      const auto first = value.find_first_not_of(" \t");
      return first == std::string::npos ? "" : value.substr(first);
    }
  }
  return "";
}

bool has_cap_sys_ptrace_here() {
  auto status = try_read_file("/proc/self/status");
  if (!status) return false;
  const std::string effective = status_field(*status, "CapEff");
  constexpr int kCapSysPtrace = 19;
  return mask_has_signal(effective, kCapSysPtrace + 1);  // the same bit arithmetic: bit N-1 for "signal" N
}

}  // namespace

std::optional<char> process_state(pid_t pid) {
  const std::optional<ProcStat> stat = read_proc_stat(pid);
  if (!stat) return std::nullopt;
  return stat->state;
}

bool mask_has_signal(const std::string& hex_mask, int signal_number) {
  if (signal_number < 1) return false;
  const int bit = signal_number - 1;
  const int digit_from_right = bit / 4;
  std::string digits;
  for (char c : hex_mask) {
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  }
  if (digit_from_right >= static_cast<int>(digits.size())) return false;
  const char c = digits[digits.size() - 1 - static_cast<std::size_t>(digit_from_right)];
  const int value = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10;
  return (value >> (bit % 4)) & 1;
}

bool catches_signal(pid_t pid, int signal_number) {
  auto status = try_read_file("/proc/" + std::to_string(pid) + "/status");
  return status && mask_has_signal(status_field(*status, "SigCgt"), signal_number);
}

ProgramKind program_kind_of_executable(const std::string& executable_path) {
  const std::string name = std::filesystem::path(executable_path).filename().string();
  return starts_with(name, "python") ? ProgramKind::python : ProgramKind::native;
}

ProgramKind guess_program_kind(pid_t pid) {
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", error);
  return error ? ProgramKind::native : program_kind_of_executable(exe.string());
}

std::string ptrace_obstacle(const std::string& ptrace_scope_text, bool has_cap_sys_ptrace) {
  std::istringstream in(ptrace_scope_text);
  int scope = 0;
  if (!(in >> scope) || scope == 0) return "";
  if (scope >= 3) return "kernel.yama.ptrace_scope is 3: no process may ptrace another";
  if (has_cap_sys_ptrace) return "";
  if (scope == 2) return "kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may read stacks";
  return "kernel.yama.ptrace_scope is 1: only a process's ancestors may ptrace it, and eu-stack is the launcher's "
         "child, not the worker's parent, unless the worker names the launcher with prctl(PR_SET_PTRACER) (mgtrain's "
         "Python hook does; or: sysctl kernel.yama.ptrace_scope=0)";
}

std::string ptrace_obstacle_here() {
  auto scope = try_read_file("/proc/sys/kernel/yama/ptrace_scope");
  return scope ? ptrace_obstacle(*scope, has_cap_sys_ptrace_here()) : "";
}

}  // namespace mgtrain::diagnose
