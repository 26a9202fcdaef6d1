// `mgtrain export` end to end on checkpoints of real training runs (`mgtrain launch --nproc 1`): the safetensors
// file read back by an independent reader here and by Python (byte for byte against the checkpoint's model/
// tensors, names equal to the model's), the TorchScript module loaded by Python's torch.jit.load with its forward
// compared to the C++ model's output (mlp, cnn with BatchNorm and dropout, resnet, gpt, a user's torchscript
// model), and the errors for bad inputs.
#include "train/catch_with_torch.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <yaml-cpp/yaml.h>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "cli/cli.hpp"
#include "config/config_loader.hpp"
#include "process/run_capture.hpp"
#include "support/temp_dir.hpp"
#include "train/models/model.hpp"
#include "train/state/train_state.hpp"
#include "util/error.hpp"

using namespace mgtrain;
namespace fs = std::filesystem;

namespace {

const std::string kBin = MGTRAIN_BIN_DIR;
const std::string kSource = MGTRAIN_SOURCE_DIR;
const std::string kPython = "/usr/bin/python3";
const std::string kCheckScript = kSource + "/tests/checkpoint_jobs/export_check.py";

CapturedRun run(const std::vector<std::string>& args, double timeout_s = 120) {
  CaptureOptions options;
  options.timeout_s = timeout_s;
  options.unset_env = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "MGTRAIN_CONFIG_FILE"};
  options.set_env = {{"OMP_NUM_THREADS", "1"}};
  return run_and_capture(args, options);
}

CapturedRun run_mgtrain(std::vector<std::string> args) {
  args.insert(args.begin(), kBin + "/mgtrain");
  return run(args);
}

// Trains `config` plus `overrides` for 20 steps with one worker and returns the checkpoint saved at the end.
std::string train_checkpoint(const fs::path& dir, const std::string& config, std::vector<std::string> overrides) {
  std::vector<std::string> args = {kBin + "/mgtrain", "launch", "--nproc", "1", "--run-id", "r"};
  if (!config.empty()) args.push_back(config);
  // (the benchmark configs save no checkpoints: name the directory explicitly)
  overrides.insert(overrides.end(), {"train.max_steps=20", "launch.log_dir=" + dir.string(), "log.every_steps=100",
                                     "checkpoint.dir=" + (dir / "r/checkpoints").string()});
  args.insert(args.end(), overrides.begin(), overrides.end());
  const CapturedRun trained = run(args, 300);
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  const auto listed = list_checkpoints((dir / "r/checkpoints").string());
  REQUIRE(!listed.empty());
  REQUIRE(listed.back().step == 20);
  return listed.back().path;
}

bool python_has_torch() {
  static const bool ok = access(kPython.c_str(), X_OK) == 0 && run({kPython, "-c", "import torch"}).exit_code == 0;
  return ok;
}

// An independent reader of a safetensors file: the header through yaml-cpp (JSON is YAML), the rest by offset.
struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  struct Tensor {
    std::string dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::map<std::string, Tensor> tensors;
  std::uint64_t covered = 0, data_size = 0;
};

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(data.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(data[static_cast<std::size_t>(i)]);  // little-endian
  REQUIRE(8 + n <= data.size());
  const YAML::Node header = YAML::Load(data.substr(8, n));
  REQUIRE(header.IsMap());
  SafetensorsFile file;
  file.data_size = data.size() - 8 - n;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& item : header) {
    const std::string name = item.first.as<std::string>();
    if (name == "__metadata__") {
      for (const auto& m : item.second) file.metadata[m.first.as<std::string>()] = m.second.as<std::string>();
      continue;
    }
    SafetensorsFile::Tensor t;
    t.dtype = item.second["dtype"].as<std::string>();
    for (const auto& d : item.second["shape"]) t.shape.push_back(d.as<int64_t>());
    const auto begin = item.second["data_offsets"][0].as<std::uint64_t>(),
               end = item.second["data_offsets"][1].as<std::uint64_t>();
    REQUIRE(begin <= end);
    REQUIRE(end <= file.data_size);
    spans.emplace_back(begin, end);
    t.bytes = data.substr(8 + n + begin, end - begin);
    file.tensors[name] = t;
  }
  std::sort(spans.begin(), spans.end());
  for (const auto& [begin, end] : spans) {
    REQUIRE(begin == file.covered);  // no gaps, no overlaps
    file.covered = end;
  }
  return file;
}

// The model the checkpoint was trained with, rebuilt here from its config and its model/ tensors, in eval mode.
std::unique_ptr<Model> model_from_checkpoint(const std::string& checkpoint, const ModelInput& input) {
  const CheckpointFile file = read_checkpoint_file(checkpoint);
  LoadOptions options;
  options.resolved = true;
  const Config config =
      load_config_text(file.metadata().at("mgtrain.config"), "checkpoint", ConfigRequest{}, EnvMap{}, options).config;
  auto model = build_model(config.model, input);
  at::NoGradGuard no_grad;
  NamedTensors all = model->named_parameters();
  for (auto& b : model->named_buffers()) all.push_back(b);
  for (auto& [name, tensor] : all) {
    const TensorEntry* entry = file.find("model/" + name);
    REQUIRE(entry);
    REQUIRE(entry->nbytes == tensor.nbytes());
    at::Tensor staged = at::empty(tensor.sizes(), tensor.options().requires_grad(false));
    std::memcpy(staged.data_ptr(), file.bytes(*entry), entry->nbytes);
    tensor.copy_(staged);
  }
  model->train(false);
  return model;
}

// The safetensors export of `checkpoint`: read back here and compared byte for byte, names equal to the model's; then
// the same checks from Python.
void check_safetensors_export(const std::string& checkpoint, const fs::path& dir, const ModelInput& input) {
  const std::string out = (dir / "model.safetensors").string();
  const CapturedRun exported = run_mgtrain({"export", checkpoint, "-o", out});
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);
  CHECK(exported.out.find(out + ": ") == 0);

  const SafetensorsFile file = read_safetensors(out);
  CHECK(file.covered == file.data_size);
  CHECK(file.metadata.at("format") == "pt");
  CHECK(file.metadata.at("mgtrain.source") == fs::path(checkpoint).filename().string());
  const CheckpointFile stored = read_checkpoint_file(checkpoint);
  CHECK(file.metadata.at("mgtrain.step") == stored.metadata().at("mgtrain.step"));
  CHECK(file.metadata.at("mgtrain.model") == stored.metadata().at("mgtrain.model"));
  std::set<std::string> model_names;
  for (const TensorEntry& t : stored.tensors()) {
    if (t.name.rfind("model/", 0) != 0) continue;
    model_names.insert(t.name.substr(6));
    const auto found = file.tensors.find(t.name.substr(6));
    REQUIRE(found != file.tensors.end());
    CHECK(found->second.dtype == t.dtype);
    CHECK(found->second.shape == t.shape);
    CHECK(found->second.bytes == std::string(reinterpret_cast<const char*>(stored.bytes(t)), t.nbytes));
  }
  CHECK(model_names.size() == file.tensors.size());

  // The names are the model's parameter and buffer names (Python's).
  auto model = model_from_checkpoint(checkpoint, input);
  std::set<std::string> expected;
  for (const auto& [name, t] : model->named_parameters()) expected.insert(name);
  for (const auto& [name, t] : model->named_buffers()) expected.insert(name);
  std::set<std::string> got;
  for (const auto& [name, t] : file.tensors) got.insert(name);
  CHECK(got == expected);

  if (!python_has_torch()) {
    WARN("skipped the Python check: " << kPython << " cannot import torch (apt-get install python3-torch)");
    return;
  }
  const CapturedRun checked = run({kPython, kCheckScript, "safetensors", out, checkpoint});
  INFO(checked.out << checked.err);
  CHECK(checked.exit_code == 0);
  CHECK(checked.out.find("ok ") == 0);
}

// The TorchScript export of `checkpoint`, loaded by Python: its forward on a fixed input against the C++ model's.
void check_torchscript_export(const std::string& checkpoint, const fs::path& dir, const ModelInput& input,
                              bool tokens) {
  const std::string default_out =
      checkpoint.substr(0, checkpoint.size() - std::string(".safetensors").size()) + ".torchscript.pt";
  const CapturedRun exported = run_mgtrain({"export", checkpoint, "--format", "torchscript"});
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);
  REQUIRE(fs::exists(default_out));
  CHECK(exported.out.find("forward matches the model") != std::string::npos);

  // The reference: the C++ model's output on a fixed input, stored as a safetensors file for Python.
  auto model = model_from_checkpoint(checkpoint, input);
  std::vector<int64_t> shape{3};
  shape.insert(shape.end(), input.sample_shape.begin(), input.sample_shape.end());
  auto generator = at::detail::createCPUGenerator(7);
  const at::Tensor x = tokens
                           ? at::randint(0, input.num_classes, shape, generator, at::TensorOptions().dtype(at::kLong))
                           : at::randn(shape, generator, at::TensorOptions().dtype(at::kFloat));
  at::Tensor y;
  {
    at::NoGradGuard no_grad;
    y = model->forward(x).contiguous();
  }
  const std::string reference = (dir / "reference.safetensors").string();
  write_checkpoint_file(reference, {},
                        {{"input", dtype_name(x.scalar_type()), x.sizes().vec(), x.data_ptr(), x.nbytes()},
                         {"output", dtype_name(y.scalar_type()), y.sizes().vec(), y.data_ptr(), y.nbytes()}});
  const std::string weights = (dir / "weights.safetensors").string();
  REQUIRE(run_mgtrain({"export", checkpoint, "-o", weights}).exit_code == 0);

  if (!python_has_torch()) {
    WARN("skipped the Python check: " << kPython << " cannot import torch (apt-get install python3-torch)");
    return;
  }
  const CapturedRun checked = run({kPython, kCheckScript, "torchscript", default_out, reference, weights});
  INFO(checked.out << checked.err);
  CHECK(checked.exit_code == 0);
  CHECK(checked.out.find("ok ") == 0);

  // The check can fail: a reference from different weights does not match.
  {
    at::NoGradGuard no_grad;
    for (auto& [name, p] : model->named_parameters()) p.add_(0.01);
    y = model->forward(x).contiguous();
  }
  const std::string wrong = (dir / "wrong.safetensors").string();
  write_checkpoint_file(wrong, {},
                        {{"input", dtype_name(x.scalar_type()), x.sizes().vec(), x.data_ptr(), x.nbytes()},
                         {"output", dtype_name(y.scalar_type()), y.sizes().vec(), y.data_ptr(), y.nbytes()}});
  const CapturedRun mismatched = run({kPython, kCheckScript, "torchscript", default_out, wrong, weights});
  INFO(mismatched.out << mismatched.err);
  CHECK(mismatched.exit_code == 1);
  CHECK(mismatched.out.find("forward differs from the C++ model's") != std::string::npos);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// `checkpoint` (the newest of run "r" under `dir`) named three other ways, each exported: the same bytes as the file
// exported by its own name, and the report line names the file taken and how it was found.
void check_other_names(const std::string& checkpoint, const fs::path& dir) {
  const std::string direct = (dir / "direct.safetensors").string();
  REQUIRE(run_mgtrain({"export", checkpoint, "-o", direct}).exit_code == 0);
  const std::string checkpoints = (dir / "r/checkpoints").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> forms = {
      {{checkpoints + "/latest"}, "named by " + checkpoints + "/latest"},
      {{(dir / "r").string()}, "the newest valid checkpoint of run " + (dir / "r").string()},
      {{"r", "--log-dir", dir.string()}, "the newest valid checkpoint of run " + (dir / "r").string()},
  };
  int n = 0;
  for (const auto& [names, how] : forms) {
    const std::string out = (dir / ("form" + std::to_string(++n) + ".safetensors")).string();
    std::vector<std::string> args = {"export"};
    args.insert(args.end(), names.begin(), names.end());
    args.insert(args.end(), {"-o", out});
    const CapturedRun exported = run_mgtrain(args);
    INFO(names[0] << "\n" << exported.out << exported.err);
    REQUIRE(exported.exit_code == 0);
    CHECK(exported.out.find(out + ": ") == 0);
    CHECK(exported.out.find("from " + checkpoint + " (step 20; " + how + ")") != std::string::npos);
    CHECK(file_bytes(out) == file_bytes(direct));
  }
}

int exit_code_of(const std::vector<std::string>& args, std::string* err = nullptr) {
  const CapturedRun r = run_mgtrain(args);
  if (err) *err = r.err;
  return r.exit_code;
}

}  // namespace

TEST_CASE("export: mlp checkpoint as safetensors and TorchScript", "[export][python]") {
  const testing::TempDir temp_dir("mgtrain-export-test-mlp");
  const fs::path dir = temp_dir.path();
  const std::string checkpoint = train_checkpoint(dir, kSource + "/configs/bench/mlp-64.yaml",
                                                  {"data.synthetic_samples=1024", "model.dropout=0.2"});
  const ModelInput input{{1, 28, 28}, 10};
  check_safetensors_export(checkpoint, dir, input);
  check_other_names(checkpoint, dir);
  check_torchscript_export(checkpoint, dir, input, false);
}

TEST_CASE("export: cnn checkpoint with BatchNorm and dropout on non-square images", "[export][python]") {
  const testing::TempDir temp_dir("mgtrain-export-test-cnn");
  const fs::path dir = temp_dir.path();
  const std::string checkpoint =
      train_checkpoint(dir, "",
                       {"model.type=cnn", "model.channels=4,8", "model.batch_norm=true", "model.fc_sizes=16",
                        "model.dropout=0.1", "data.dataset=synthetic", "data.input_shape=2,12,8", "data.num_classes=5",
                        "data.synthetic_samples=512", "train.batch_size=16", "train.eval_at_epoch_end=false"});
  const ModelInput input{{2, 12, 8}, 5};
  check_safetensors_export(checkpoint, dir, input);
  // BatchNorm's running statistics were trained (not the initial 0 and 1), so eval mode really uses them.
  const CheckpointFile stored = read_checkpoint_file(checkpoint);
  const TensorEntry* counter = stored.find("model/features.1.num_batches_tracked");
  REQUIRE(counter);
  int64_t batches = 0;
  std::memcpy(&batches, stored.bytes(*counter), sizeof batches);
  CHECK(batches == 20);
  check_torchscript_export(checkpoint, dir, input, false);
}

TEST_CASE("export: resnet checkpoint as TorchScript", "[export][python]") {
  const testing::TempDir temp_dir("mgtrain-export-test-resnet");
  const fs::path dir = temp_dir.path();
  const std::string checkpoint = train_checkpoint(
      dir, "",
      {"model.type=resnet", "model.resnet_blocks=1", "data.dataset=synthetic", "data.input_shape=3,8,8",
       "data.synthetic_samples=256", "train.batch_size=8", "train.eval_at_epoch_end=false"});
  const ModelInput input{{3, 8, 8}, 10};
  check_safetensors_export(checkpoint, dir, input);
  check_torchscript_export(checkpoint, dir, input, false);
}

TEST_CASE("export: gpt checkpoint as TorchScript", "[export][python]") {
  const testing::TempDir temp_dir("mgtrain-export-test-gpt");
  const fs::path dir = temp_dir.path();
  {
    std::ofstream text(dir / "input.txt");
    for (int i = 0; i < 200; ++i) text << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  const CapturedRun tokenized = run_mgtrain({"tokenize", (dir / "input.txt").string(), (dir / "tokens").string()});
  INFO(tokenized.out << tokenized.err);
  REQUIRE(tokenized.exit_code == 0);
  const std::string checkpoint = train_checkpoint(
      dir, "",
      {"model.type=gpt", "model.layers=2", "model.heads=2", "model.d_model=16", "model.context_length=8",
       "model.dropout=0.1", "data.dataset=tokens", "data.path=" + (dir / "tokens/train.bin").string(),
       "train.batch_size=8", "train.eval_at_epoch_end=false"});
  const CheckpointFile stored = read_checkpoint_file(checkpoint);
  const int64_t vocab = stored.find("model/lm_head.weight")->shape[0];
  const ModelInput input{{8}, vocab};
  check_safetensors_export(checkpoint, dir, input);
  check_torchscript_export(checkpoint, dir, input, true);
}

TEST_CASE("export: a user's torchscript model gets the trained weights", "[export][python]") {
  if (!python_has_torch()) {
    WARN("skipped: " << kPython << " cannot import torch, which writes the user's module");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-export-test-torchscript");
  const fs::path dir = temp_dir.path();
  const std::string module_path = (dir / "net.pt").string();
  // torch.jit.script reads the class's source, so it must live in a file.
  const fs::path script = dir / "make_net.py";
  std::ofstream(script) << "import sys, torch\n"
                           "class Net(torch.nn.Module):\n"
                           "    def __init__(self):\n"
                           "        super().__init__()\n"
                           "        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)\n"
                           "        self.bn = torch.nn.BatchNorm2d(4)\n"
                           "        self.fc = torch.nn.Linear(4 * 8 * 8, 10)\n"
                           "    def forward(self, x):\n"
                           "        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))\n"
                           "torch.manual_seed(0)\n"
                           "torch.jit.script(Net()).save(sys.argv[1])\n";
  const CapturedRun scripted = run({kPython, script.string(), module_path});
  INFO(scripted.out << scripted.err);
  REQUIRE(scripted.exit_code == 0);
  const std::string checkpoint = train_checkpoint(
      dir, "",
      {"model.type=torchscript", "model.path=" + module_path, "data.dataset=synthetic", "data.input_shape=1,8,8",
       "data.synthetic_samples=256", "train.batch_size=8", "train.eval_at_epoch_end=false"});
  const ModelInput input{{1, 8, 8}, 10};
  check_safetensors_export(checkpoint, dir, input);
  check_torchscript_export(checkpoint, dir, input, false);
}

TEST_CASE("export: bad inputs exit 2 with clear messages", "[export]") {
  const testing::TempDir temp_dir("mgtrain-export-test-errors");
  const fs::path dir = temp_dir.path();
  // A checkpoint-layout file without a training run behind it is enough for the launcher-side checks.
  const float weights[6] = {1, 2, 3, 4, 5, 6};
  const std::string checkpoint = (dir / "checkpoint-step000000007.safetensors").string();
  write_checkpoint_file(checkpoint, {{"mgtrain.step", "7"}, {"mgtrain.model", "test"}},
                        {{"model/1.weight", "F32", {2, 3}, weights, sizeof weights},
                         {"optim/1.weight/momentum_buffer", "F32", {2, 3}, weights, sizeof weights}});
  std::string err;

  // Missing file (both formats).
  CHECK(exit_code_of({"export", (dir / "absent.safetensors").string()}, &err) == 2);
  CHECK(err.find("absent.safetensors: no such file") != std::string::npos);
  CHECK(exit_code_of({"export", (dir / "absent.safetensors").string(), "--format", "torchscript"}, &err) == 2);
  CHECK(err.find("absent.safetensors: no such file") != std::string::npos);
  // A directory without checkpoints; a run id that is no run.
  fs::create_directory(dir / "empty");
  CHECK(exit_code_of({"export", (dir / "empty").string()}, &err) == 2);
  CHECK(err.find("empty holds no valid checkpoint") != std::string::npos);
  CHECK(exit_code_of({"export", "no-such-run", "--log-dir", dir.string()}, &err) == 2);
  CHECK(err.find("unknown run 'no-such-run'") != std::string::npos);
  // A file that is not a checkpoint at all (a `latest` pointer's text under another name): said so, not a huge
  // header length alone.
  const std::string text_file = (dir / "notes.txt").string();
  std::ofstream(text_file) << "checkpoint-step000000007.safetensors\n";
  CHECK(exit_code_of({"export", text_file, "-o", (dir / "t.safetensors").string()}, &err) == 2);
  CHECK(err.find("notes.txt: not an mgtrain checkpoint (the header length field says") != std::string::npos);
  CHECK(err.find("the file has 37 bytes)") != std::string::npos);
  // Unknown format.
  CHECK(exit_code_of({"export", checkpoint, "--format", "onnx"}, &err) == 2);
  CHECK(err.find("onnx") != std::string::npos);
  CHECK(err.find("--format") != std::string::npos);
  // No checkpoint given.
  CHECK(exit_code_of({"export"}, &err) == 2);
  CHECK(err.find("checkpoint") != std::string::npos);

  // The default output is next to the checkpoint; a second export refuses to overwrite it, --force does.
  const std::string default_out = (dir / "checkpoint-step000000007.model.safetensors").string();
  CHECK(exit_code_of({"export", checkpoint}) == 0);
  REQUIRE(fs::exists(default_out));
  CHECK(read_checkpoint_file(default_out).find("1.weight") != nullptr);
  CHECK(read_checkpoint_file(default_out).find("optim/1.weight/momentum_buffer") == nullptr);
  CHECK(list_checkpoints(dir.string()).size() == 1);  // the export is not taken for a checkpoint
  const auto written = fs::last_write_time(default_out);
  CHECK(exit_code_of({"export", checkpoint}, &err) == 2);
  CHECK(err.find(default_out + " exists; add --force") != std::string::npos);
  CHECK(fs::last_write_time(default_out) == written);
  const std::string ts_out = (dir / "existing.pt").string();
  std::ofstream(ts_out) << "keep";
  CHECK(exit_code_of({"export", checkpoint, "--format", "torchscript", "-o", ts_out}, &err) == 2);
  CHECK(err.find("existing.pt exists; add --force") != std::string::npos);
  CHECK(fs::file_size(ts_out) == 4);
  CHECK(exit_code_of({"export", checkpoint, "--force"}) == 0);
  // The output may not be the checkpoint itself, even with --force.
  CHECK(exit_code_of({"export", checkpoint, "-o", checkpoint, "--force"}, &err) == 2);
  CHECK(err.find("is the checkpoint itself") != std::string::npos);

  // Not a training checkpoint: no model/ tensors; for TorchScript, no mgtrain.config.
  const std::string no_model = (dir / "no-model.safetensors").string();
  write_checkpoint_file(no_model, {}, {{"optim/x", "F32", {6}, weights, sizeof weights}});
  CHECK(exit_code_of({"export", no_model}, &err) == 2);
  CHECK(err.find("no model/ tensors") != std::string::npos);
  CHECK(exit_code_of({"export", checkpoint, "--format", "torchscript", "-o", (dir / "x.pt").string()}, &err) == 2);
  CHECK(err.find("no mgtrain.config metadata") != std::string::npos);
  CHECK(!fs::exists(dir / "x.pt"));

  // A damaged checkpoint: the CorruptCheckpoint message, exit 2, nothing written (both formats).
  const std::string damaged = (dir / "damaged.safetensors").string();
  fs::copy_file(checkpoint, damaged);
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const std::string expected_problem = verify_checkpoint_file(damaged);
  REQUIRE(!expected_problem.empty());
  CHECK(exit_code_of({"export", damaged, "-o", (dir / "d.safetensors").string()}, &err) == 2);
  CHECK(err.find(expected_problem) != std::string::npos);
  CHECK(exit_code_of({"export", damaged, "--format", "torchscript", "-o", (dir / "d.pt").string()}, &err) == 2);
  CHECK(err.find(expected_problem) != std::string::npos);
  CHECK(!fs::exists(dir / "d.safetensors"));
  CHECK(!fs::exists(dir / "d.pt"));
  fs::resize_file(damaged, fs::file_size(damaged) - 5);  // truncated
  CHECK(exit_code_of({"export", damaged, "-o", (dir / "d.safetensors").string()}, &err) == 2);
  CHECK(err.find("damaged.safetensors") != std::string::npos);
}

TEST_CASE("export: command-line parsing", "[export][cli]") {
  const auto request = std::get<ExportRequest>(parse_cli({"export", "ckpt.safetensors"}));
  CHECK(request.checkpoint == "ckpt.safetensors");
  CHECK(request.format == "safetensors");
  CHECK(request.output.empty());
  CHECK(!request.force);
  const auto full =
      std::get<ExportRequest>(parse_cli({"export", "c", "--format", "torchscript", "-o", "m.pt", "--force"}));
  CHECK(full.format == "torchscript");
  CHECK(full.output == "m.pt");
  CHECK(full.force);
  CHECK(std::get<PrintRequest>(parse_cli({"--help"})).text.find("mgtrain export") != std::string::npos);
  CHECK_THROWS_AS(parse_cli({"export", "c", "--format", "onnx"}), UsageError);
}
