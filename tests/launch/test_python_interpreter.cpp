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
