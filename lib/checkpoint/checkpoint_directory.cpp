// Naming, choosing, pointing at and pruning checkpoint files in one directory (see checkpoint_directory.hpp).
#include "checkpoint/checkpoint_directory.hpp"
#include "util/json_text.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

constexpr std::string_view kNamePrefix = "checkpoint-step";
constexpr std::string_view kNameSuffix = ".safetensors";
constexpr std::size_t kStepDigits = 9;
constexpr std::size_t kMaxPointerSize = 64 * 1024;

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// The names of the entries of `dir` (without . and ..); a missing directory has none.
std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* handle = ::opendir(dir.c_str());
  if (!handle) {
    if (errno == ENOENT) return names;
    throw SystemError(fmt::format("open directory {}", dir), errno);
  }
  errno = 0;
  while (const dirent* entry = ::readdir(handle)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
    errno = 0;
  }
  const int err = errno;
  ::closedir(handle);
  if (err != 0) throw SystemError(fmt::format("read directory {}", dir), err);
  return names;
}

// A small text file's content, or nullopt when it does not exist.
std::optional<std::string> read_pointer_file(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw SystemError(fmt::format("open {}", path), errno);
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("read {}", path), errno);
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxPointerSize) {
      throw Error(fmt::format("{}: not a checkpoint pointer file (more than {} bytes)", path, kMaxPointerSize));
    }
  }
  return text;
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find_first_of("/\n\r") == std::string::npos &&
         name.find('\0') == std::string::npos;
}

void remove_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw SystemError(fmt::format("remove {}", path), errno);
}

}  // namespace

std::string checkpoint_file_name(std::int64_t step) {
  if (step < 0) throw Error(fmt::format("checkpoint step {} is negative", step));
  return fmt::format("{}{:0{}}{}", kNamePrefix, step, kStepDigits, kNameSuffix);
}

std::optional<std::int64_t> checkpoint_step_from_file_name(const std::string& name) {
  if (name.size() < kNamePrefix.size() + kStepDigits + kNameSuffix.size() || !starts_with(name, kNamePrefix) ||
      !ends_with(name, kNameSuffix)) {
    return std::nullopt;
  }
  const std::string digits = name.substr(kNamePrefix.size(), name.size() - kNamePrefix.size() - kNameSuffix.size());
  const std::optional<std::uint64_t> step = parse_digits(digits);
  if (!step || *step > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  if (checkpoint_file_name(static_cast<std::int64_t>(*step)) != name) return std::nullopt;  // canonical spelling only
  return static_cast<std::int64_t>(*step);
}

std::vector<CheckpointListing> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointListing> found;
  for (const std::string& name : directory_entries(dir)) {
    if (const auto step = checkpoint_step_from_file_name(name)) found.push_back({*step, name, join_path(dir, name)});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

NewestValidCheckpoint newest_valid_checkpoint(const std::string& dir) {
  NewestValidCheckpoint result;
  std::vector<std::string> problems;
  const std::vector<CheckpointListing> all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    std::string problem = verify_checkpoint_file(it->path);
    if (problem.empty()) {
      result.chosen = *it;
      break;
    }
    problems.push_back(std::move(problem));
  }
  for (const std::string& problem : problems) {
    result.notes.push_back(result.chosen ? fmt::format("{}, using {}", problem, result.chosen->path)
                                         : fmt::format("{}, and no older checkpoint is valid", problem));
  }
  return result;
}

ResolvedCheckpoint resolve_checkpoint(const std::string& path) {
  ResolvedCheckpoint resolved;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    NewestValidCheckpoint newest = newest_valid_checkpoint(path);
    if (newest.chosen) resolved.path = newest.chosen->path;
    resolved.how = fmt::format("the newest valid checkpoint in {}", path);
    resolved.notes = std::move(newest.notes);
    return resolved;
  }
  const std::size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  resolved.path = path;
  if (name != "latest" && name != "best") return resolved;
  std::optional<std::string> target;
  try {
    if (name == "latest") {
      target = read_latest_pointer(dir);
    } else if (const std::optional<BestCheckpoint> best = read_best_pointer(dir)) {
      target = best->file_name;
    }
  } catch (const SystemError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (!target) return resolved;  // no such file: the caller says so
  resolved.path = slash == std::string::npos ? *target : join_path(path.substr(0, slash + 1), *target);
  resolved.how = fmt::format("named by {}", path);
  return resolved;
}

void update_latest_pointer(const std::string& dir, const std::string& file_name) {
  if (!is_plain_file_name(file_name)) {
    throw Error(
        fmt::format("update {}: {} is not a plain file name", join_path(dir, "latest"), json_string(file_name)));
  }
  write_file_atomically(join_path(dir, "latest"), file_name + "\n");
}

std::optional<std::string> read_latest_pointer(const std::string& dir) {
  const std::string path = join_path(dir, "latest");
  const auto text = read_pointer_file(path);
  if (!text) return std::nullopt;
  std::string name = *text;
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (!is_plain_file_name(name)) {
    throw Error(fmt::format("{}: expected one file name and a newline, found {}", path, json_string(*text)));
  }
  return name;
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int keep_last,
                                           const std::set<std::string>& protect) {
  if (keep_last < 1)
    throw Error(fmt::format("prune checkpoints in {}: keep_last is {}, it must be at least 1", dir, keep_last));
  std::vector<CheckpointListing> all = list_checkpoints(dir);
  const std::optional<std::string> latest = read_latest_pointer(dir);
  std::vector<std::string> removed;
  const std::size_t removable = all.size() > static_cast<std::size_t>(keep_last) ? all.size() - keep_last : 0;
  for (std::size_t i = 0; i < removable; ++i) {  // oldest first
    const CheckpointListing& old = all[i];
    if (protect.count(old.name) || (latest && *latest == old.name)) continue;
    remove_file(old.path);
    removed.push_back(old.name);
  }
  return removed;
}

std::vector<std::string> remove_stale_temp_files(const std::string& dir) {
  std::vector<std::string> removed;
  for (const std::string& name : directory_entries(dir)) {
    const bool checkpoint_temp =
        starts_with(name, "." + std::string(kNamePrefix)) && name.find(".tmp.") != std::string::npos;
    const bool pointer_temp = starts_with(name, ".latest.tmp.") || starts_with(name, ".best.tmp.");
    if (!checkpoint_temp && !pointer_temp) continue;
    remove_file(join_path(dir, name));
    removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

void update_best_pointer(const std::string& dir, const BestCheckpoint& best) {
  const std::string path = join_path(dir, "best");
  if (!is_plain_file_name(best.file_name))
    throw Error(fmt::format("update {}: {} is not a plain file name", path, json_string(best.file_name)));
  if (best.metric.empty()) throw Error(fmt::format("update {}: the metric name is empty", path));
  if (!std::isfinite(best.value))
    throw Error(fmt::format("update {}: {} = {} is not a finite number", path, best.metric, best.value));
  nlohmann::ordered_json pointer;
  pointer["file"] = best.file_name;
  pointer["metric"] = best.metric;
  pointer["value"] = best.value;
  write_file_atomically(path, json_text(pointer) + "\n");
}

std::optional<BestCheckpoint> read_best_pointer(const std::string& dir) {
  const std::string path = join_path(dir, "best");
  const auto text = read_pointer_file(path);
  if (!text) return std::nullopt;
  const auto malformed = [&](const std::string& why) {
    return Error(fmt::format(
        "{}: malformed best-checkpoint pointer ({}); expected {{\"file\":...,\"metric\":...,\"value\":...}}", path,
        why));
  };
  BestCheckpoint best;
  const nlohmann::json root = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) throw malformed("not valid JSON");
  if (!root.is_object()) throw malformed("not a JSON object");
  const auto file = root.find("file"), metric = root.find("metric"), value = root.find("value");
  if (file == root.end() || !file->is_string() || metric == root.end() || !metric->is_string() || value == root.end() ||
      !value->is_number()) {
    throw malformed("file, metric or value missing");
  }
  best.file_name = file->get<std::string>();
  best.metric = metric->get<std::string>();
  best.value = value->get<double>();
  if (!is_plain_file_name(best.file_name) || best.metric.empty() || !std::isfinite(best.value)) {
    throw malformed("empty or invalid field");
  }
  return best;
}

void create_checkpoint_directory(const std::string& dir) {
  if (dir.empty()) throw Error("checkpoint directory: empty path");
  // mkdir each component in turn, so the error names the one that failed (a file in the way, no permission).
  for (std::size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string prefix = dir.substr(0, end);
    if (!prefix.empty() && prefix.back() != '/') {
      if (::mkdir(prefix.c_str(), 0755) != 0) {
        const int err = errno;
        struct stat info {};
        if (err != EEXIST) throw SystemError(fmt::format("create directory {}", prefix), err);
        if (::stat(prefix.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
          throw Error(fmt::format("create directory {}: {} exists and is not a directory", dir, prefix));
        }
      }
    }
    if (end == std::string::npos) break;
  }
}

}  // namespace mgtrain
