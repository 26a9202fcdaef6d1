// Finding the rendezvous token (see rendezvous_secret.hpp).
#include "launch/rendezvous_secret.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "config/config_file.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/log.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

constexpr std::size_t kMaxTokenFileBytes = 4096;

const char* kMakeOne =
    "make one with `openssl rand -hex 32` or `python3 -c 'import secrets; print(secrets.token_hex(32))'`";

std::string checked(const std::string& secret, const std::string& source) {
  if (secret.size() < rdzv::kMinTokenBytes) {
    throw UsageError(fmt::format("the rendezvous token from {} has {} characters; at least {} are needed ({})", source,
                                 secret.size(), rdzv::kMinTokenBytes, kMakeOne));
  }
  return secret;
}

// The file's text (trimmed): a regular file of at most 4 KiB that no other user may read or write.
std::string read_secret_file(const std::string& path, const std::string& what) {
  return trim(read_bounded_file(path, what, kMaxTokenFileBytes, FileSecrecy::kOwnerOnly));
}

// `--rdzv-token-file -`: the first line of stdin, where the --hosts launcher writes it (bounded in size and time).
std::string read_token_line_from_stdin() {
  if (isatty(STDIN_FILENO)) {
    throw UsageError("launch.rdzv_token_file - reads the token from stdin, which is a terminal: pipe it in");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string line;
  while (line.size() <= kMaxTokenFileBytes) {
    pollfd ready{STDIN_FILENO, POLLIN, 0};
    if (wait_ready(&ready, 1, deadline, "for the token on stdin") == 0) {
      if (std::chrono::steady_clock::now() < deadline) continue;  // a signal
      throw UsageError("launch.rdzv_token_file -: no token line arrived on stdin within 30 s");
    }
    char c = 0;
    const ssize_t count = read(STDIN_FILENO, &c, 1);  // byte by byte: what follows the line stays for others
    if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (count <= 0) break;
    if (c == '\n') return trim(line);
    line += c;
  }
  throw UsageError(fmt::format("launch.rdzv_token_file -: stdin ended or sent more than {} bytes before a newline",
                               kMaxTokenFileBytes));
}

// Makes the key file with O_EXCL through a temporary name and link(): of several tasks starting at once (on a
// shared home, on several hosts) one wins and every task reads its key.
void create_key_file(const std::string& path) {
  std::error_code error;
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(directory, error);
  if (error)
    throw UsageError(
        fmt::format("cannot create {} for the SLURM rendezvous key: {}", directory.string(), error.message()));
  chmod(directory.c_str(), 0700);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string temporary = fmt::format("{}.{}.{}", path, host, getpid());
  {
    Fd fd(open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) throw UsageError(fmt::format("cannot create {}: {}", temporary, std::strerror(errno)));
    const std::string key = rdzv::random_hex(32) + "\n";
    if (write(fd.get(), key.data(), key.size()) != static_cast<ssize_t>(key.size()) || fsync(fd.get()) != 0) {
      const int saved = errno;
      unlink(temporary.c_str());
      throw UsageError(fmt::format("cannot write {}: {}", temporary, std::strerror(saved)));
    }
  }
  const int linked = link(temporary.c_str(), path.c_str());
  const int saved = errno;
  unlink(temporary.c_str());
  if (linked != 0 && saved != EEXIST) throw UsageError(fmt::format("cannot create {}: {}", path, std::strerror(saved)));
}

}  // namespace

std::string slurm_key_path(const EnvMap& environment) {
  const std::string config_home = environment_value(environment, "XDG_CONFIG_HOME").value_or("");
  if (!config_home.empty() && config_home.front() == '/') return config_home + "/mgtrain/rdzv.key";
  const std::string home = environment_value(environment, "HOME").value_or("");
  if (home.empty()) return "";
  return home + "/.config/mgtrain/rdzv.key";
}

rdzv::RendezvousToken rendezvous_token(const LaunchConfig& launch, const std::optional<std::string>& flag_token,
                                       const EnvMap& environment, const std::string& slurm_job_id) {
  if (flag_token) return {checked(*flag_token, "--rdzv-token"), "--rdzv-token"};
  const std::string variable = environment_value(environment, kRendezvousTokenVariable).value_or("");
  if (!variable.empty()) return {checked(variable, kRendezvousTokenVariable), kRendezvousTokenVariable};
  if (trim(launch.rdzv_token_file) == "-") return {checked(read_token_line_from_stdin(), "stdin"), "stdin"};
  if (!trim(launch.rdzv_token_file).empty()) {
    const std::string source = "launch.rdzv_token_file " + launch.rdzv_token_file;
    return {checked(read_secret_file(launch.rdzv_token_file, "launch.rdzv_token_file"), source), source};
  }
  if (slurm_job_id.empty()) return {};
  const std::string key_path = slurm_key_path(environment);
  if (key_path.empty()) {
    log::warn("inside SLURM job {} with no HOME: no rendezvous token can be derived; set {} on every node",
              slurm_job_id, kRendezvousTokenVariable);
    return {};
  }
  if (access(key_path.c_str(), F_OK) != 0) create_key_file(key_path);
  const std::string key = read_secret_file(key_path, "the SLURM rendezvous key");
  if (key.size() < rdzv::kMinTokenBytes) {
    throw UsageError(
        fmt::format("the SLURM rendezvous key {} is shorter than {} characters: delete it (a new one is "
                    "made) or put a longer secret in it",
                    key_path, rdzv::kMinTokenBytes));
  }
  return {rdzv::hmac_sha256_hex(key, "slurm-job " + slurm_job_id),
          fmt::format("SLURM job {} and {}", slurm_job_id, key_path)};
}

}  // namespace mgtrain
