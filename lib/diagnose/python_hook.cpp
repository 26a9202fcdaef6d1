// The Python workers' stack-dump hook: its text, writing it, and the worker variables that arm it (see
// python_hook.hpp).
#include "diagnose/python_hook.hpp"

#include <signal.h>

#include <filesystem>

#include "contract/log_layout.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

namespace mgtrain::diagnose {

namespace {

// Kept in Python 3.6+ syntax (no walrus, no f-string features beyond 3.6) for any interpreter a user runs.
constexpr const char* kHookSource =
    R"PY(# mgtrain's stack-dump hook, written by `mgtrain launch` (lib/diagnose/python_hook.cpp).
# It registers Python's faulthandler on mgtrain's stack signal, so that mgtrain can write every thread's stack
# into the rank's stacks.txt without stopping the program, then imports the sitecustomize it shadows.
import os as _mgtrain_os
import sys as _mgtrain_sys


def _mgtrain_arm():
    path = _mgtrain_os.environ.get("MGTRAIN_FAULTHANDLER_FILE")
    number = _mgtrain_os.environ.get("MGTRAIN_STACK_SIGNAL")
    if not path or not number:
        return None
    try:
        import faulthandler
        stream = open(path, "a")
        faulthandler.register(int(number), file=stream, all_threads=True, chain=False)
        return stream
    except Exception as error:  # never stop the user's program over diagnostics
        _mgtrain_sys.stderr.write("mgtrain: stack dumps not armed in this process: %s\n" % (error,))
        return None


def _mgtrain_allow_launcher_ptrace():
    # Yama's ptrace_scope 1 (Ubuntu's default) lets only ancestors ptrace a process; eu-stack, which reads the
    # native frames, is the launcher's child. Name the launcher (this process's parent) as allowed tracer: Yama
    # then also allows its descendants. Nothing happens where the scope is 0 or Yama is absent.
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as scope:
            if scope.read().strip() != "1":
                return
        import ctypes
        pr_set_ptracer = 0x59616D61
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_ptracer, _mgtrain_os.getppid(), 0, 0, 0)
    except Exception:
        pass


def _mgtrain_import_shadowed():
    here = _mgtrain_os.environ.get("MGTRAIN_PYTHON_HOOK_DIR") or _mgtrain_os.path.dirname(
        _mgtrain_os.path.abspath(__file__))
    here = _mgtrain_os.path.realpath(here)
    _mgtrain_sys.path[:] = [p for p in _mgtrain_sys.path
                            if _mgtrain_os.path.realpath(p or ".") != here]
    this = _mgtrain_sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the user's or the distribution's, if any)
    except ImportError as error:
        _mgtrain_sys.modules["sitecustomize"] = this
        if error.name != "sitecustomize":
            raise


_mgtrain_stream = _mgtrain_arm()  # kept open for faulthandler
if _mgtrain_stream is not None:
    _mgtrain_allow_launcher_ptrace()
_mgtrain_import_shadowed()
)PY";

}  // namespace

int stack_signal() { return SIGRTMIN + kStackSignalOffset; }

const std::string& python_hook_source() {
  static const std::string source = kHookSource;
  return source;
}

std::string write_python_hook(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw SystemError("cannot create the Python hook folder " + directory, error.value());
  AtomicFileWriter writer(directory + "/sitecustomize.py");
  writer.write(python_hook_source().data(), python_hook_source().size());
  writer.commit();
  return directory;
}

EnvMap python_hook_environment(const EnvMap& environment, const std::string& hook_directory,
                               const std::string& rank_directory) {
  const std::string hook = std::filesystem::absolute(hook_directory).lexically_normal().string();
  std::string python_path = hook;
  if (auto existing = environment_value(environment, "PYTHONPATH"); existing && !existing->empty()) {
    python_path += ":" + *existing;
  }
  return EnvMap{
      {"PYTHONPATH", python_path},
      {kHookDirVariable, hook},
      {kStacksFileVariable,
       std::filesystem::absolute(log_layout::faulthandler_file(rank_directory)).lexically_normal().string()},
      {kStacksSignalVariable, std::to_string(stack_signal())},
  };
}

}  // namespace mgtrain::diagnose
