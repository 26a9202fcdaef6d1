// What a checkpoint holds and restoring it (see checkpoint_content.hpp).
#include "train/loop/checkpoint_content.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/optim/optimizer.h>

#include "config/config_yaml.hpp"
#include "train/loop/grad_scaler.hpp"
#include "train/state/train_state.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"
#include "util/xxhash64.hpp"

namespace mgtrain {
namespace {

std::string rank_prefix(int rank) { return fmt::format("rank{}/", rank); }

std::string hex64(std::uint64_t value) { return fmt::format("{:016x}", value); }

// Where a stored tensor's bytes are, for restore_train_state.
class CheckpointLookup : public TensorViewMap {
 public:
  explicit CheckpointLookup(const CheckpointFile& file) : TensorViewMap(views_of(file)) {}

 private:
  static std::vector<TensorView> views_of(const CheckpointFile& file) {
    std::vector<TensorView> views;
    for (const TensorEntry& entry : file.tensors())
      views.push_back(TensorView{entry.name, entry.dtype, entry.shape, file.bytes(entry), entry.nbytes});
    return views;
  }
};

}  // namespace

CheckpointContent::CheckpointContent(const Config& config, std::string resolved_config, Communicator& comm,
                                     Model& model, torch::optim::Optimizer& optimizer)
    : config_(config),
      resolved_config_(std::move(resolved_config)),
      comm_(comm),
      model_(model),
      optimizer_(optimizer) {}

std::int64_t CheckpointContent::metadata_int(const CheckpointFile& file, const std::string& key) {
  auto found = file.metadata().find(key);
  try {
    if (found != file.metadata().end()) {
      std::size_t used = 0;
      const long long value = std::stoll(found->second, &used);
      if (used == found->second.size() && value >= 0) return value;
    }
  } catch (const std::exception&) {}
  throw CorruptCheckpoint(
      fmt::format("{}: metadata {} is missing or not a non-negative integer; is this an mgtrain "
                  "checkpoint?",
                  file.path(), key));
}

CheckpointContent::RngRows CheckpointContent::gather_rng_rows() {
  // Every rank's RNG state, gathered through one summed buffer (each rank fills its own row).
  RngRows rng{capture_rng_state(), {}};
  std::int64_t row = 0;
  for (const auto& [name, state] : rng.mine) row += state.numel();
  rng.rows = at::zeros({comm_.world_size(), row}, at::kByte);
  std::int64_t offset = 0;
  for (const auto& [name, state] : rng.mine) {
    rng.rows[comm_.rank()].narrow(0, offset, state.numel()).copy_(state.reshape({-1}));
    offset += state.numel();
  }
  comm_.allreduce_sum(rng.rows);
  return rng;
}

NamedTensors CheckpointContent::tensors(const RngRows& rng) const {
  NamedTensors state = capture_train_state(model_, optimizer_);
  if (scaler_ && scaler_->enabled()) {
    for (auto& entry : scaler_->state()) state.push_back(std::move(entry));
  }
  for (int r = 0; r < comm_.world_size(); ++r) {
    std::int64_t offset = 0;
    for (const auto& [name, one] : rng.mine) {
      state.emplace_back(rank_prefix(r) + name, rng.rows[r].narrow(0, offset, one.numel()).view(one.sizes()));
      offset += one.numel();
    }
  }
  return state;
}

std::map<std::string, std::string> CheckpointContent::metadata(const TrainPosition& at, const std::string& reason,
                                                               const EvalResult* eval) const {
  std::map<std::string, std::string> m;
  m["mgtrain.version"] = build_info::kVersion;
  m["mgtrain.created"] = format_utc_seconds(unix_millis_now() / 1000);
  m["mgtrain.reason"] = reason;
  m["mgtrain.world_size"] = std::to_string(comm_.world_size());
  m["mgtrain.step"] = std::to_string(at.step);
  m["mgtrain.epoch"] = std::to_string(at.epoch);
  m["mgtrain.samples_in_epoch"] = std::to_string(at.samples_in_epoch);
  m["mgtrain.model"] = model_.summary();
  m["mgtrain.optimizer"] = std::string(name_of(config_.optim.name));
  m["mgtrain.config"] = resolved_config_;
  m["mgtrain.config_hash"] = hex64(xxhash64(resolved_config_.data(), resolved_config_.size()));
  if (eval && eval->samples > 0) {
    m["mgtrain.eval.loss"] = fmt::format("{}", eval->loss);
    m["mgtrain.eval.accuracy"] = fmt::format("{}", eval->accuracy);
    if (eval->perplexity > 0) m["mgtrain.eval.perplexity"] = fmt::format("{}", eval->perplexity);
  }
  return m;
}

TrainPosition CheckpointContent::restore(const CheckpointFile& file, const std::string& what, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  if (auto saved = file.metadata().find("mgtrain.optimizer");
      saved != file.metadata().end() && saved->second != name_of(config_.optim.name)) {
    throw UsageError(
        fmt::format("checkpoint {} was saved with optim.name {}, this run uses {}: its optimizer state does not "
                    "fit (set optim.name: {} or checkpoint.resume: never)",
                    what, saved->second, config_.optim.name, saved->second));
  }
  const CheckpointLookup stored(file);
  restore_train_state(model_, optimizer_, stored);
  if (scaler_ && scaler_->enabled()) scaler_->restore(stored);  // the same on every rank: all decide alike

  const std::int64_t saved_world = metadata_int(file, "mgtrain.world_size");
  TrainPosition at;
  at.step = metadata_int(file, "mgtrain.step");
  at.epoch = metadata_int(file, "mgtrain.epoch");
  at.samples_in_epoch = metadata_int(file, "mgtrain.samples_in_epoch");
  // Each rank continues its own random stream; a rank the saved run did not have takes rank (r mod saved world)'s.
  restore_rng_state(stored, rank_prefix(comm_.rank() % static_cast<int>(std::max<std::int64_t>(saved_world, 1))));
  seconds += seconds_since(start);
  if (comm_.rank() == 0) report(what, file, at, saved_world, seconds);
  return at;
}

void CheckpointContent::report(const std::string& what, const CheckpointFile& file, const TrainPosition& at,
                               std::int64_t saved_world, double seconds) const {
  log::progress("resumed from {}: step {}, epoch {}, {} samples into the epoch ({:.2f} s)", what, at.step, at.epoch + 1,
                at.samples_in_epoch, seconds);
  if (saved_world != comm_.world_size()) {
    log::progress(
        "note: the checkpoint was saved by {} ranks, this run has {}: the rest of the epoch is re-sharded over {} "
        "ranks",
        saved_world, comm_.world_size(), comm_.world_size());
  }
  auto hash = file.metadata().find("mgtrain.config_hash");
  const std::string current = hex64(xxhash64(resolved_config_.data(), resolved_config_.size()));
  if (hash != file.metadata().end() && hash->second != current) {
    const auto saved = file.metadata().find("mgtrain.config");
    const std::string keys = saved == file.metadata().end()
                                 ? ""
                                 : describe_config_differences(config_differences(saved->second, resolved_config_));
    log::progress("note: the config differs from the one the checkpoint was saved with: {}",
                  keys.empty() ? "see its mgtrain.config metadata" : keys);
  }
}

}  // namespace mgtrain
