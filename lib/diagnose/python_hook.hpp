// How the launcher arms Python workers for stack dumps without any package: a sitecustomize.py it writes into the
// run directory and puts first on the workers' PYTHONPATH. At interpreter start the hook opens the rank's
// faulthandler file (append) and calls faulthandler.register(<stack signal>, file, all_threads=True, chain=False);
// then it imports the sitecustomize that it shadows (the user's on PYTHONPATH, or the distribution's), so that one
// keeps working. faulthandler's dump runs in the C signal handler, so it works while Python is blocked in C code
// (a sleep, a lock, a collective) or another thread holds the GIL, and the process goes on afterwards.
//
// The signal is SIGRTMIN+kStackSignalOffset (a real-time signal: mgtrain forwards SIGUSR1/SIGUSR2 to workers for
// save-and-stop, and SIGQUIT/SIGABRT end a process). Its default action ends a process, so dump_stacks sends it only
// to a process whose /proc/<pid>/status says it catches it (diagnose/process_facts.hpp).
#pragma once

#include <string>

#include "util/environment.hpp"

namespace mgtrain::diagnose {

// The stack signal is SIGRTMIN + this (glibc: 34 + 6 = 40, the same number Python's signal.SIGRTMIN + 6 gives).
inline constexpr int kStackSignalOffset = 6;
int stack_signal();

// The variables the hook reads.
inline constexpr const char* kStacksFileVariable = "MGTRAIN_FAULTHANDLER_FILE";
inline constexpr const char* kStacksSignalVariable = "MGTRAIN_STACK_SIGNAL";
// The hook's own folder; it takes itself off sys.path before importing the sitecustomize it shadows.
inline constexpr const char* kHookDirVariable = "MGTRAIN_PYTHON_HOOK_DIR";

// The text of the hook (sitecustomize.py).
const std::string& python_hook_source();

// Writes <directory>/sitecustomize.py (creating the directory) and returns the directory, for PYTHONPATH.
// Throws SystemError naming the path when it cannot.
std::string write_python_hook(const std::string& directory);

// The variables to add to one worker's environment `environment` (which is not changed): the hook's folder first on
// PYTHONPATH (the user's PYTHONPATH kept after it), the faulthandler file and the signal number. Pure.
EnvMap python_hook_environment(const EnvMap& environment, const std::string& hook_directory,
                               const std::string& rank_directory);

}  // namespace mgtrain::diagnose
