// Which interpreter runs `mgtrain launch train.py` / `-m module`, in torchrun's order with mgtrain's setting on
// top: launch.python (--python, MGTRAIN_LAUNCH_PYTHON, YAML) > $PYTHON_EXEC (torchrun's variable) > python3 on PATH.
// Also the hint for a program that died at once because its interpreter cannot import torch.
#pragma once

#include <string>

#include "util/environment.hpp"

namespace mgtrain {

struct PythonInterpreter {
  std::string command;  // as chosen: "python3", "/opt/venv/bin/python"
  std::string path;     // resolved absolute path (PATH searched); "" when not found
  std::string source;   // "launch.python (--python)", "PYTHON_EXEC", "python3 on PATH"
};

// `configured`/`origin`: launch.python's value and origin (config_loader's origin_of). Never throws.
PythonInterpreter choose_python(const std::string& configured, const std::string& origin, const EnvMap& environment);

// The executable `command` names: itself when it has a '/', else the first executable match on `path_variable`.
std::string find_executable(const std::string& command, const std::string& path_variable);

// For the failure report: when a worker ended within `kQuickFailureSeconds` of its start and its stderr says
// torch is missing, the sentence naming the interpreter and how to choose another; "" otherwise.
inline constexpr double kQuickFailureSeconds = 30.0;
std::string missing_torch_hint(const std::string& stderr_text, double seconds_after_start, const std::string& python_path,
                               const std::string& python_source);

}  // namespace mgtrain
