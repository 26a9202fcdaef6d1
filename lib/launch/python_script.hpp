// The script file a Python command line runs, when that is sure (`python3 [options] FILE ...`, or the torchrun form
// `mgtrain launch FILE`), so that the launcher can refuse a file that is not there before any worker starts: every
// rank would fail with Python's "can't open file" (exit 2) otherwise. A command it cannot read for sure (`-m`, `-c`,
// an option it does not know, a program that is not named like Python) names no script and is not checked.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

// Whether `program` (a path or a name) is named like CPython's interpreter: python, python3, python3.12 (any folder).
bool named_like_python(const std::string& program);

// The script argument of `command` (the program first), or nullopt: the program is not a Python interpreter (not
// `interpreter_known` and not named_like_python), or it runs no script for sure (`-m`, `-c`, `-` (stdin), no
// argument, `--help`/`--version`, an option this does not know), or the script names a ${local_rank} placeholder.
// Python's options before the script are skipped: flags (`-u`, `-uB`, `-OO`), `-W`/`-X` with their values, `--`.
std::optional<std::string> python_script_argument(const std::vector<std::string>& command, bool interpreter_known);

// Throws UsageError when `command` runs a Python script (python_script_argument) that does not exist, resolved against
// `working_directory` (the workers'), naming the file, the directory and a file with a close name in it if any.
void check_python_script(const std::vector<std::string>& command, bool interpreter_known,
                         const std::string& working_directory);

}  // namespace mgtrain
