// The interpreter for `mgtrain launch train.py`: launch.python > PYTHON_EXEC > python3 on PATH, and the hint
// for a program whose interpreter cannot import torch.
#include <catch2/catch.hpp>

#include "launch/python_interpreter.hpp"

using namespace mgtrain;

TEST_CASE("interpreter: launch.python, then PYTHON_EXEC, then python3 on PATH", "[python]") {
  const EnvMap env = {{"PATH", "/nonexistent:/bin:/usr/bin"}, {"PYTHON_EXEC", "/bin/sh"}};
  PythonInterpreter chosen = choose_python("/bin/true", "--python", env);
  CHECK(chosen.path == "/bin/true");
  CHECK(chosen.source == "launch.python (--python)");
  chosen = choose_python("", "default", env);
  CHECK(chosen.command == "/bin/sh");
  CHECK(chosen.source == "PYTHON_EXEC");
  chosen = choose_python("", "default", {{"PATH", "/nonexistent:/bin"}, {"PYTHON_EXEC", ""}});
  CHECK(chosen.command == "python3");
  CHECK(chosen.source == "python3 on PATH");
  CHECK(choose_python("sh", "config.yaml", {{"PATH", "/nonexistent:/bin"}}).path == "/bin/sh");
  CHECK(choose_python("no-such-python", "default", {{"PATH", "/bin"}}).path.empty());
}

TEST_CASE("missing torch hint: only for a quick failure that says torch is missing", "[python]") {
  const std::string stderr_text = "Traceback ...\nModuleNotFoundError: No module named 'torch'\n";
  const std::string hint = missing_torch_hint(stderr_text, 0.4, "/usr/bin/python3", "PYTHON_EXEC");
  CHECK_THAT(hint, Catch::Contains("/usr/bin/python3 (chosen by PYTHON_EXEC) cannot import torch") &&
                       Catch::Contains("--python") && Catch::Contains("launch.python"));
  CHECK(missing_torch_hint(stderr_text, 600, "/usr/bin/python3", "PYTHON_EXEC").empty());
  CHECK(missing_torch_hint("ModuleNotFoundError: No module named 'numpy'", 0.4, "/usr/bin/python3", "x").empty());
  CHECK(missing_torch_hint(stderr_text, 0.4, "", "x").empty());  // not a Python launch
}
