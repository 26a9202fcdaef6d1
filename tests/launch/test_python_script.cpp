// The script of a Python command line (only the forms that surely run one), and the refusal of a script that does not
// exist, naming it and the workers' working directory.
#include <catch2/catch.hpp>

#include <fstream>

#include "launch/python_script.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;

namespace {

std::optional<std::string> script_of(const std::vector<std::string>& command, bool interpreter_known = false) {
  return python_script_argument(command, interpreter_known);
}

}  // namespace

TEST_CASE("python script: a program named like Python", "[python]") {
  for (const char* name : {"python", "python3", "python3.12", "/usr/bin/python3", "venv/bin/python", "python2.7"}) {
    CHECK(named_like_python(name));
  }
  for (const char* name : {"pythonx", "python3-config", "python3.", "ipython", "/opt/python3/bin/sh", "sh", ""}) {
    CHECK_FALSE(named_like_python(name));
  }
}

TEST_CASE("python script: the first argument after Python's options", "[python]") {
  CHECK(script_of({"python3", "train.py"}) == "train.py");
  CHECK(script_of({"python3", "train.py", "--lr", "0.1"}) == "train.py");
  CHECK(script_of({"/usr/bin/python3", "-u", "train.py"}) == "train.py");
  CHECK(script_of({"python3", "-uB", "-OO", "train.py"}) == "train.py");
  CHECK(script_of({"python3", "-W", "ignore", "train.py"}) == "train.py");
  CHECK(script_of({"python3", "-Wignore", "-X", "dev", "-Xfaulthandler", "train.py"}) == "train.py");
  CHECK(script_of({"python3", "-uW", "error", "train.py"}) == "train.py");
  CHECK(script_of({"python3", "--check-hash-based-pycs", "never", "train.py"}) == "train.py");
  CHECK(script_of({"python3", "--", "-odd-name.py"}) == "-odd-name.py");
  CHECK(script_of({"python3", "train"}) == "train");  // Python runs a file of any name
  // The torchrun form: the interpreter is known whatever its name (launch.python, PYTHON_EXEC).
  CHECK(script_of({"/opt/env/bin/py", "train.py"}, true) == "train.py");
}

TEST_CASE("python script: no check where a script is not sure", "[python]") {
  CHECK_FALSE(script_of({"python3", "-m", "pkg.train"}));
  CHECK_FALSE(script_of({"python3", "-mpkg.train"}));
  CHECK_FALSE(script_of({"python3", "-u", "-m", "pkg.train"}));
  CHECK_FALSE(script_of({"python3", "-c", "import x"}));
  CHECK_FALSE(script_of({"python3", "-uc", "import x"}));
  CHECK_FALSE(script_of({"python3", "-"}));  // stdin
  CHECK_FALSE(script_of({"python3"}));
  CHECK_FALSE(script_of({"python3", "-u"}));
  CHECK_FALSE(script_of({"python3", "--version"}));
  CHECK_FALSE(script_of({"python3", "-V"}));
  CHECK_FALSE(script_of({"python3", "--no-such-option", "train.py"}));
  CHECK_FALSE(script_of({"python3", "-Z", "train.py"}));  // an option this does not know
  CHECK_FALSE(script_of({"python3", "train_${local_rank}.py"}));
  CHECK_FALSE(script_of({"python3", ""}));
  // Not Python: `--no-python` style programs and wrappers are never read.
  CHECK_FALSE(script_of({"sh", "train.py"}));
  CHECK_FALSE(script_of({"./train.py"}));
  CHECK_FALSE(script_of({"env", "python3", "train.py"}));
  CHECK_FALSE(script_of({}, true));
}

TEST_CASE("python script: a missing one is refused with its name and the workers' directory", "[python]") {
  testing::TempDir dir;
  std::ofstream(dir / "train.py") << "print('hi')\n";
  check_python_script({"python3", "train.py"}, false, dir.path());
  check_python_script({"python3", dir / "train.py"}, false, "/");
  check_python_script({"python3", "-m", "trian"}, false, dir.path());  // a module: not checked
  check_python_script({"python3", "."}, false, dir.path());            // a folder with __main__.py: there
  try {
    check_python_script({"python3", "trian.py"}, false, dir.path());
    FAIL("no error");
  } catch (const UsageError& error) {
    CHECK_THAT(std::string(error.what()), Contains("the Python script trian.py does not exist in " + dir.path() +
                                                   ", the workers' working directory (did you mean train.py?)"));
  }
  try {
    check_python_script({"/usr/bin/python3", "sub/train.py"}, true, dir.path());
    FAIL("no error");
  } catch (const UsageError& error) {
    CHECK_THAT(std::string(error.what()), Contains("the Python script sub/train.py does not exist in " + dir.path()));
  }
  CHECK_THROWS_AS(check_python_script({"python3", dir / "nothing.py"}, false, "/"), UsageError);
}
