// `mgtrain export CHECKPOINT [--format safetensors|torchscript] [-o OUT] [--force] [--log-dir DIR]`: the model of a
// training checkpoint for use outside mgtrain. CHECKPOINT is a checkpoint file, a `latest`/`best` pointer, a
// checkpoint directory, a run directory or a run id (resolve_source below); the report says which file it took.
//  safetensors (here, torch-free): the "model/<name>" tensors, renamed to <name> (the model's parameter and buffer
//               names, Python's), with __metadata__ {"format": "pt", "mgtrain.model", "mgtrain.step",
//               "mgtrain.source"}; safetensors.torch.load_file(OUT) gives a state_dict for the same Python model.
//  torchscript: exec()s `mgtrain-worker --export-torchscript CHECKPOINT OUT [--force]` (LibTorch lives only there;
//               lib/train/state/torchscript_export.hpp) after the checks below, so its exit code is ours.
// A missing or damaged checkpoint, an existing OUT without --force, OUT naming the checkpoint itself: exit 2.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "commands.hpp"
#include "contract/log_layout.hpp"
#include "contract/worker_binary.hpp"
#include "observe/run_history.hpp"
#include "observe/run_record.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

namespace fs = std::filesystem;

std::string file_name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The checkpoint file to export and how it was found ("" when it is what was given).
struct Source {
  std::string path;
  std::string how;
};

// A run directory's checkpoint directory: its config.yaml's checkpoint.dir (a relative one from where the launch
// ran, run.json's cwd), else <run>/checkpoints, the default.
std::string run_checkpoint_directory(const fs::path& run_dir) {
  std::error_code error;
  std::optional<std::string> configured;
  try {
    const YAML::Node dir = YAML::LoadFile(log_layout::config_file(run_dir.string()))["checkpoint"]["dir"];
    if (dir && dir.IsScalar()) configured = dir.Scalar();
  } catch (const YAML::Exception&) {  // no config.yaml, or an unreadable one: the default place
  }
  if (configured && configured->empty()) {
    throw UsageError(fmt::format("export: run {} saved no checkpoints (its config.yaml has checkpoint.dir: \"\")",
                                 run_dir.string()));
  }
  if (configured) {
    fs::path dir = *configured;
    if (dir.is_relative()) {
      try {
        const std::optional<RunRecord> record = read_run_record(run_dir.string());
        if (record && !record->cwd.empty()) dir = fs::path(record->cwd) / dir;
      } catch (const Error&) {  // an unreadable run.json: relative to here
      }
    }
    if (fs::is_directory(dir, error)) return dir.string();
  }
  const fs::path fallback = run_dir / "checkpoints";
  if (fs::is_directory(fallback, error)) return fallback.string();
  throw UsageError(fmt::format("export: run {} has no checkpoint directory (no {}{})", run_dir.string(),
                               configured ? *configured + ", no " : "", fallback.string()));
}

// What CHECKPOINT names: an existing file or directory of checkpoints by resolve_checkpoint (the rule
// checkpoint.resume follows: a file is itself, `latest`/`best` the file they name, a directory its newest valid
// checkpoint); a run directory (config.yaml or run.json in it) or a run id under the log directory: the newest valid
// checkpoint of its checkpoint directory.
Source resolve_source(const ExportRequest& request) {
  const std::string& given = request.checkpoint;
  std::error_code error;
  std::string target = given;
  std::string run;  // the run directory, when one was named
  const bool exists = fs::exists(given, error);
  if (exists && fs::is_directory(given, error) &&
      (fs::exists(log_layout::config_file(given), error) || fs::exists(log_layout::run_json(given), error))) {
    run = given;
  } else if (!exists && given.find('/') == std::string::npos && !ends_with(given, ".safetensors")) {
    const std::string log_dir = request.log_dir.empty() ? log_layout::default_log_dir() : request.log_dir;
    run = resolve_run_directory(given, log_dir);  // UsageError naming the runs there
  }
  if (!run.empty()) target = run_checkpoint_directory(run);
  ResolvedCheckpoint resolved;
  try {
    resolved = resolve_checkpoint(target);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("export: {}", e.what()));
  }
  for (const std::string& note : resolved.notes) log::warn("skipping damaged checkpoint: {}", note);
  if (resolved.path.empty()) {
    throw UsageError(fmt::format("export: {} holds no valid checkpoint{}", target,
                                 resolved.notes.empty() ? "" : " (the damaged ones are named above)"));
  }
  if (!run.empty()) return {resolved.path, fmt::format("the newest valid checkpoint of run {}", run)};
  return {resolved.path, resolved.how};
}

// <dir>/<stem>.model.safetensors or <dir>/<stem>.torchscript.pt, the stem being the file name without its last
// extension (checkpoint-step000001000.safetensors -> checkpoint-step000001000).
std::string default_output(const std::string& checkpoint, const std::string& format) {
  const std::size_t slash = checkpoint.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : checkpoint.substr(0, slash + 1);
  std::string stem = file_name_of(checkpoint);
  const std::size_t dot = stem.rfind('.');
  if (dot != std::string::npos && dot > 0) stem.resize(dot);
  return dir + stem + (format == "torchscript" ? ".torchscript.pt" : ".model.safetensors");
}

void check_paths(const std::string& checkpoint, const std::string& out, bool force) {
  struct stat in_stat {};
  if (::stat(checkpoint.c_str(), &in_stat) != 0) {
    throw UsageError(
        fmt::format("export: {}: {}", checkpoint, errno == ENOENT ? "no such file" : std::strerror(errno)));
  }
  struct stat out_stat {};
  if (::stat(out.c_str(), &out_stat) == 0) {
    if (out_stat.st_dev == in_stat.st_dev && out_stat.st_ino == in_stat.st_ino) {
      throw UsageError(fmt::format("export: the output {} is the checkpoint itself; choose another file with -o", out));
    }
    if (!force)
      throw UsageError(
          fmt::format("export: {} exists; add --force to overwrite it, or choose another file with -o", out));
  }
}

CheckpointFile open_checkpoint(const std::string& path) {
  try {
    return read_checkpoint_file(path);
  } catch (const CorruptCheckpoint& e) {
    throw UsageError(e.what());
  }
}

std::string metadata_or(const CheckpointFile& file, const std::string& key, const std::string& fallback) {
  const auto it = file.metadata().find(key);
  return it == file.metadata().end() ? fallback : it->second;
}

// "; named by runs/r/checkpoints/latest" (how the file was found), or "" for a file given by its name.
std::string how_text(const Source& source) { return source.how.empty() ? "" : "; " + source.how; }

int export_safetensors(const Source& source, const std::string& out) {
  const CheckpointFile file = open_checkpoint(source.path);
  std::vector<TensorRecord> records;
  std::uint64_t total_bytes = 0;
  for (const TensorEntry& t : file.tensors()) {
    if (!starts_with(t.name, "model/")) continue;
    records.push_back({t.name.substr(6), t.dtype, t.shape, file.bytes(t), static_cast<std::size_t>(t.nbytes)});
    total_bytes += t.nbytes;
  }
  if (records.empty()) {
    throw UsageError(
        fmt::format("export: {}: no model/ tensors; is it a checkpoint written by mgtrain's trainer?", source.path));
  }
  // Wider dtypes first (as the safetensors library orders them), each group in the model's order: every tensor then
  // starts at a multiple of its element size, e.g. BatchNorm's int64 num_batches_tracked after float32 weights.
  std::stable_sort(records.begin(), records.end(), [](const TensorRecord& a, const TensorRecord& b) {
    return checkpoint_dtype_size(a.dtype) > checkpoint_dtype_size(b.dtype);
  });
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"mgtrain.model", metadata_or(file, "mgtrain.model", "")},
      {"mgtrain.step", metadata_or(file, "mgtrain.step", "")},
      {"mgtrain.source", file_name_of(source.path)},
  };
  write_checkpoint_file(out, metadata, records);
  const std::string size = total_bytes < 1000000 ? fmt::format("{} bytes", total_bytes)
                                                 : fmt::format("{:.1f} MB", static_cast<double>(total_bytes) / 1e6);
  std::printf("%s: %zu tensors, %s, from %s (step %s%s)\n", out.c_str(), records.size(), size.c_str(),
              source.path.c_str(), metadata_or(file, "mgtrain.step", "?").c_str(), how_text(source).c_str());
  return exit_code::kSuccess;
}

[[noreturn]] void exec_torchscript_export(const ExportRequest& request, const Source& source, const std::string& out) {
  // Verified here first: a damaged file is reported without starting LibTorch.
  open_checkpoint(source.path);
  if (!source.how.empty()) std::printf("exporting %s (%s)\n", source.path.c_str(), source.how.c_str());
  const EnvMap env = current_environment();
  const auto configured = env.find("MGTRAIN_LAUNCH_WORKER");
  const std::string worker = find_worker_binary(configured == env.end() ? "" : configured->second);
  std::vector<std::string> args = {worker, "--export-torchscript", source.path, out};
  if (request.force) args.push_back("--force");
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(worker.c_str(), argv.data());
  throw SystemError(fmt::format("cannot run {}", worker), errno);
}

}  // namespace

int run_export_command(const ExportRequest& request) {
  const Source source = resolve_source(request);
  const std::string out = request.output.empty() ? default_output(source.path, request.format) : request.output;
  check_paths(source.path, out, request.force);
  if (request.format == "torchscript") exec_torchscript_export(request, source, out);
  return export_safetensors(source, out);
}

}  // namespace mgtrain
