// Which interpreter runs `mgtrain launch train.py` / `-m module`, in torchrun's order with mgtrain's setting on
// top: launch.python (--python, MGTRAIN_LAUNCH_PYTHON, YAML) > $PYTHON_EXEC (torchrun's variable) > python3 on PATH.
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

}  // namespace mgtrain
