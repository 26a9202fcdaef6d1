// Implementation of the launcher integration-test helpers.
#include "launch_fixture.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "host/port_probe.hpp"
#include "launch/launch.hpp"

extern char** environ;

namespace mgtrain::testing {

std::string write_script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

LaunchConfig test_launch_config(const TempDir& dir, int nproc) {
  LaunchConfig launch;
  launch.nproc = NprocSpec::workers(nproc);
  launch.run_id = "test-run";
  launch.log_dir = dir / "runs";
  launch.grace_period = 2.0;
  return launch;
}

LaunchOutcome launch_in_process(const LaunchConfig& launch, const std::vector<std::string>& command,
                                const std::vector<std::pair<std::string, std::string>>& extra_env) {
  LaunchOutcome outcome;
  std::string console_dir = launch.log_dir + "/console";
  std::filesystem::create_directories(console_dir);
  int out_fd = open((console_dir + "/stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = open((console_dir + "/stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  EnvMap environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    std::size_t equals = text.find('=');
    if (equals != std::string::npos) environment[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [key, value] : extra_env) environment[key] = value;

  LaunchRequest request;
  request.command = command;
  LoadedConfig loaded;
  loaded.config.launch = launch;
  LaunchEnvironment outside;
  outside.stdout_fd = out_fd;
  outside.stderr_fd = err_fd;
  outside.environment = &environment;
  try {
    outcome.exit_code = run_launch(request, loaded, outside);
  } catch (...) {
    close(out_fd);
    close(err_fd);
    throw;
  }
  close(out_fd);
  close(err_fd);
  outcome.out = read_text(console_dir + "/stdout");
  outcome.err = read_text(console_dir + "/stderr");
  outcome.run_dir = launch.log_dir + "/" + launch.run_id;
  return outcome;
}

ChildProcess start_process(const std::vector<std::string>& argv, const std::string& output_prefix,
                           const std::vector<std::pair<std::string, std::string>>& extra_env) {
  ChildProcess child;
  child.out_path = output_prefix + ".out";
  child.err_path = output_prefix + ".err";
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(child.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(child.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [key, value] : extra_env) setenv(key.c_str(), value.c_str(), 1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  child.pid = pid;
  return child;
}

std::optional<int> wait_for_exit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::vector<pid_t> live_job_processes(const std::set<pid_t>& groups, const std::string& marker) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::string stat = read_text("/proc/" + std::string(entry->d_name) + "/stat");
    std::size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;  // gone meanwhile
    std::istringstream fields(stat.substr(paren + 2));
    char state = '?';
    long ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (state == 'Z' || state == 'X') continue;
    std::string cmdline = read_text("/proc/" + std::string(entry->d_name) + "/cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (groups.count(static_cast<pid_t>(pgrp)) != 0 || (!marker.empty() && cmdline.find(marker) != std::string::npos)) {
      found.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return found;
}

std::string harness_path() { return LAUNCH_HARNESS_PATH; }

int listening_socket(int& port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  listen(fd, 1);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
  return fd;
}

int free_port() {
  SocketPortProbe ports;
  return ports.pick_free_port();
}

const std::string kMgtrain = std::string(MGTRAIN_BIN_DIR) + "/mgtrain";

CapturedRun mgtrain_launch(const TempDir& dir, std::vector<std::string> args, CaptureOptions options) {
  args.insert(args.begin(), {kMgtrain, "launch", "--log-dir", dir / "runs"});
  options.timeout_s = 60;
  return run_and_capture(args, options);
}

}  // namespace mgtrain::testing
