// Finding the script of a Python command line, and refusing one that does not exist.
#include "launch/python_script.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/did_you_mean.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

// CPython's one-letter options without a value (`python3 --help`), combinable as in `-uB`; -h, -V and -? print and
// exit, and -c, -m, -W, -X take a value.
constexpr const char* kPlainFlags = "bBdEiIOPqRsSuvx";

bool digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

bool named_like_python(const std::string& program) {
  const std::string name = std::filesystem::path(program).filename().string();
  if (name.rfind("python", 0) != 0) return false;
  const std::string version = name.substr(6);  // "", "3", "3.12"
  if (version.empty()) return true;
  const std::size_t dot = version.find('.');
  if (dot == std::string::npos) return digits(version);
  return digits(version.substr(0, dot)) && digits(version.substr(dot + 1));
}

std::optional<std::string> python_script_argument(const std::vector<std::string>& command, bool interpreter_known) {
  if (command.empty() || !(interpreter_known || named_like_python(command.front()))) return std::nullopt;
  std::optional<std::string> script;
  for (std::size_t index = 1; index < command.size() && !script; ++index) {
    const std::string& argument = command[index];
    if (argument == "--") {
      if (index + 1 < command.size()) script = command[index + 1];
      break;
    }
    if (argument.size() < 2 || argument.front() != '-') {
      if (argument == "-") return std::nullopt;  // the program comes from stdin
      script = argument;
      break;
    }
    if (argument.rfind("--", 0) == 0) {
      if (argument != "--check-hash-based-pycs") return std::nullopt;  // --help, --version, ... or unknown
      ++index;                                                         // its value
      continue;
    }
    for (std::size_t at = 1; at < argument.size(); ++at) {
      const char option = argument[at];
      if (option == 'W' || option == 'X') {
        if (at + 1 == argument.size()) ++index;  // the value is the next argument, else the rest of this one
        break;
      }
      if (std::strchr(kPlainFlags, option) == nullptr) return std::nullopt;  // -c, -m, -h, -V, or unknown
    }
  }
  if (!script || script->empty() || script->find("${") != std::string::npos) return std::nullopt;
  return script;
}

void check_python_script(const std::vector<std::string>& command, bool interpreter_known,
                         const std::string& working_directory) {
  const std::optional<std::string> script = python_script_argument(command, interpreter_known);
  if (!script) return;
  namespace fs = std::filesystem;
  const fs::path given(*script);
  const fs::path path = given.is_absolute() ? given : fs::path(working_directory) / given;
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 || (errno != ENOENT && errno != ENOTDIR)) return;  // there, or not for sure
  std::vector<std::string> names;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(path.parent_path(), error)) {
    if (entry.path().extension() == ".py") names.push_back(entry.path().filename().string());
  }
  std::string suggestion;
  if (std::optional<std::string> close = closest_match(given.filename().string(), names)) {
    suggestion = " (did you mean " + (given.parent_path() / *close).string() + "?)";
  }
  const std::string where = given.is_absolute() ? " (the workers run in " + working_directory + ")"
                                                : " in " + working_directory + ", the workers' working directory";
  throw UsageError("the Python script " + *script + " does not exist" + where + suggestion +
                   ": check its name and path; no worker was started");
}

}  // namespace mgtrain
