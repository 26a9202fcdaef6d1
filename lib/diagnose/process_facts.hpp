// What /proc says about a process that a stack dump needs before it acts: whether it is alive or stopped
// (SIGSTOP: a signal stays pending, so faulthandler cannot answer), whether it catches a signal (the stack
// signal's default action ends a process, so it is sent only to one that catches it), what kind of program it is,
// and whether this process may ptrace it (Yama's ptrace_scope) for eu-stack.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace mgtrain::diagnose {

// The state letter of /proc/<pid>/stat ('R', 'S', 'D', 'T', 't', 'Z', ...), or nothing when the process is gone.
std::optional<char> process_state(pid_t pid);
inline bool is_stopped_state(char state) { return state == 'T' || state == 't'; }

// Whether `pid` has a handler for `signal_number` (SigCgt of /proc/<pid>/status). False when unreadable.
bool catches_signal(pid_t pid, int signal_number);
// The same test on a SigCgt hex mask (pure, for tests).
bool mask_has_signal(const std::string& hex_mask, int signal_number);

// The kinds of program whose stacks mgtrain knows how to take.
enum class ProgramKind {
  python,  // a Python interpreter: faulthandler (Python frames) and eu-stack (native frames)
  native,  // mgtrain-worker or any other native program: eu-stack
};
// From /proc/<pid>/exe's name: "python", "python3", "python3.11", ... are python; everything else native.
ProgramKind guess_program_kind(pid_t pid);
ProgramKind program_kind_of_executable(const std::string& executable_path);

// Why this process cannot ptrace `pid` (Yama's /proc/sys/kernel/yama/ptrace_scope: 0 or absent allows a process
// of the same user; 1 only its ancestors, which eu-stack as the launcher's child is not, unless the worker named
// a tracer with PR_SET_PTRACER; 2 only CAP_SYS_PTRACE; 3 nobody), or "" when nothing is known to forbid it.
std::string ptrace_obstacle(const std::string& ptrace_scope_text, bool has_cap_sys_ptrace);
std::string ptrace_obstacle_here();

}  // namespace mgtrain::diagnose
