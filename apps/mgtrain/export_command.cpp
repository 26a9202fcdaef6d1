// `mgtrain export CHECKPOINT [--format safetensors|torchscript] [-o OUT] [--force]`: the model of a training
// checkpoint for use outside mgtrain.
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
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/checkpoint_file.hpp"
#include "commands.hpp"
#include "contract/worker_binary.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

std::string file_name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

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
  if (S_ISDIR(in_stat.st_mode)) {
    throw UsageError(fmt::format(
        "export: {} is a directory; give one checkpoint file (the directory's `latest` names the newest)", checkpoint));
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

int export_safetensors(const ExportRequest& request, const std::string& out) {
  const CheckpointFile file = open_checkpoint(request.checkpoint);
  std::vector<TensorRecord> records;
  std::uint64_t total_bytes = 0;
  for (const TensorEntry& t : file.tensors()) {
    if (!starts_with(t.name, "model/")) continue;
    records.push_back({t.name.substr(6), t.dtype, t.shape, file.bytes(t), static_cast<std::size_t>(t.nbytes)});
    total_bytes += t.nbytes;
  }
  if (records.empty()) {
    throw UsageError(fmt::format("export: {}: no model/ tensors; is it a checkpoint written by mgtrain's trainer?",
                                 request.checkpoint));
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
      {"mgtrain.source", file_name_of(request.checkpoint)},
  };
  write_checkpoint_file(out, metadata, records);
  const std::string size = total_bytes < 1000000 ? fmt::format("{} bytes", total_bytes)
                                                 : fmt::format("{:.1f} MB", static_cast<double>(total_bytes) / 1e6);
  std::printf("%s: %zu tensors, %s, from %s (step %s)\n", out.c_str(), records.size(), size.c_str(),
              request.checkpoint.c_str(), metadata_or(file, "mgtrain.step", "?").c_str());
  return exit_code::kSuccess;
}

[[noreturn]] void exec_torchscript_export(const ExportRequest& request, const std::string& out) {
  // Verified here first: a damaged file is reported without starting LibTorch.
  open_checkpoint(request.checkpoint);
  const EnvMap env = current_environment();
  const auto configured = env.find("MGTRAIN_LAUNCH_WORKER");
  const std::string worker = find_worker_binary(configured == env.end() ? "" : configured->second);
  std::vector<std::string> args = {worker, "--export-torchscript", request.checkpoint, out};
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
  const std::string out = request.output.empty() ? default_output(request.checkpoint, request.format) : request.output;
  check_paths(request.checkpoint, out, request.force);
  if (request.format == "torchscript") exec_torchscript_export(request, out);
  return export_safetensors(request, out);
}

}  // namespace mgtrain
