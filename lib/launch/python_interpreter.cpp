// Choosing and resolving the interpreter for Python programs.
#include "launch/python_interpreter.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace mgtrain {

std::string find_executable(const std::string& command, const std::string& path_variable) {
  auto executable = [](const std::string& candidate) {
    struct stat info {};
    return stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(candidate.c_str(), X_OK) == 0;
  };
  if (command.empty()) return "";
  if (command.find('/') != std::string::npos) {
    if (!executable(command)) return "";
    if (command.front() == '/') return command;
    char cwd[4096];
    return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + command : command;
  }
  std::size_t start = 0;
  while (start <= path_variable.size()) {
    std::size_t end = path_variable.find(':', start);
    if (end == std::string::npos) end = path_variable.size();
    std::string directory = path_variable.substr(start, end - start);
    if (directory.empty()) directory = ".";  // an empty PATH entry is the current directory
    std::string candidate = directory + "/" + command;
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

PythonInterpreter choose_python(const std::string& configured, const std::string& origin, const EnvMap& environment) {
  PythonInterpreter python;
  auto python_exec = environment.find("PYTHON_EXEC");
  if (!configured.empty()) {
    python.command = configured;
    python.source = "launch.python (" + origin + ")";
  } else if (python_exec != environment.end() && !python_exec->second.empty()) {
    python.command = python_exec->second;
    python.source = "PYTHON_EXEC";
  } else {
    python.command = "python3";
    python.source = "python3 on PATH";
  }
  auto path = environment.find("PATH");
  python.path = find_executable(python.command, path == environment.end() ? "/usr/bin:/bin" : path->second);
  return python;
}

}  // namespace mgtrain
