// The torchrun personality's log directory, launcher error file and death by an unhandled signal.
#include "launch/torchrun_personality.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "contract/log_layout.hpp"
#include "output/file_tail.hpp"
#include "supervise/run_directory.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/json_text.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"
#include "util/time_format.hpp"

namespace mgtrain {
namespace {

std::optional<std::string> error_file_named(const EnvMap& environment) {
  std::optional<std::string> named = environment_value(environment, "TORCHELASTIC_ERROR_FILE");
  if (named && named->empty()) return std::nullopt;
  return named;
}

void write_error_file(const std::string& path, const std::string& text) {
  try {
    write_run_file(path, text);
  } catch (const Error& error) {
    log::warn("cannot write TORCHELASTIC_ERROR_FILE: {}", error.what());
  }
}

}  // namespace

LoadedConfig with_torchrun_log_dir(const LoadedConfig& loaded, const EnvMap& environment) {
  if (!loaded.is_default("launch.log_dir")) return loaded;
  LoadedConfig adjusted = loaded;
  const std::string& log_dir = loaded.config.launch.log_dir;
  const std::string temp = log_layout::temp_log_dir(environment);
  adjusted.config.launch.log_dir = temp;
  adjusted.origin["launch.log_dir"] = "torchrun's default (a temporary directory, nothing under the current one)";
  std::string& checkpoints = adjusted.config.checkpoint.dir;
  if (loaded.is_default("checkpoint.dir") && starts_with(checkpoints, log_dir + "/")) {
    checkpoints = temp + checkpoints.substr(log_dir.size());
  }
  return adjusted;
}

void write_launcher_error_file(const FailureReport& report, const EnvMap& environment, Personality personality) {
  const std::optional<std::string> path = error_file_named(environment);
  if (!path) return;
  std::optional<std::string> root_text;
  if (report.root_cause.error_file && report.root_cause.error_file->problem.empty()) {
    const std::string& log = report.root_cause.stderr_log;
    root_text = read_small_file(log_layout::error_file(log.substr(0, log.rfind('/'))));
  }
  std::string text = launcher_error_file_json(report, root_text, static_cast<long long>(unix_seconds_now()));
  if (personality == Personality::Torchrun) {
    if (!root_text) return;  // torchrun: "local_rank N FAILED with no error file", and no file
    nlohmann::ordered_json copied = nlohmann::ordered_json::parse(text, nullptr, false);
    if (copied.is_object()) copied.erase("other_failures");  // mgtrain's addition; torchrun copies the child's file
    text = json_text(copied);
  }
  write_error_file(*path, text);
}

std::string torchrun_signal_exception_text(int signal) {
  return "SignalException: Process " + std::to_string(getpid()) + " got signal: " + std::to_string(signal);
}

void write_torchrun_exception_file(const std::string& text, const EnvMap& environment) {
  const std::optional<std::string> path = error_file_named(environment);
  if (!path) return;
  nlohmann::ordered_json record = nlohmann::ordered_json::object();
  record["message"] = {
      {"message", text},
      {"extraInfo",
       {{"py_callstack", text}, {"timestamp", std::to_string(static_cast<long long>(unix_seconds_now()))}}}};
  write_error_file(*path, json_text(record));
}

void die_by_signal(int signal) {
  std::fflush(nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal, &default_action, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  const rlimit no_core{0, 0};  // SIGQUIT's default action would leave a core of the launcher in the current directory
  setrlimit(RLIMIT_CORE, &no_core);
  raise(signal);
  _exit(128 + signal);  // a signal whose default action does not end the process (none of the six)
}

}  // namespace mgtrain
