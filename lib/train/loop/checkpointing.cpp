// Saving and resuming checkpoints for the trainer (see checkpointing.hpp).
#include "train/loop/checkpointing.hpp"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "config/config_yaml.hpp"
#include "train/loop/grad_scaler.hpp"
#include "train/state/train_state.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"
#include "util/xxhash64.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string rank_prefix(int rank) { return fmt::format("rank{}/", rank); }

std::string hex64(std::uint64_t value) { return fmt::format("{:016x}", value); }

// The metric checkpoint.best_metric names, and whether larger is better.
std::optional<std::pair<double, bool>> metric_value(BestMetric metric, const EvalResult* eval) {
  if (!eval || eval->samples == 0) return std::nullopt;
  switch (metric) {
    case BestMetric::EvalLoss:
      return std::make_pair(eval->loss, false);
    case BestMetric::EvalAccuracy:
      return std::make_pair(eval->accuracy, true);
    case BestMetric::EvalPerplexity:
      if (eval->perplexity > 0) return std::make_pair(eval->perplexity, false);
      break;
    case BestMetric::None:
      break;
  }
  return std::nullopt;
}

std::int64_t metadata_int(const CheckpointFile& file, const std::string& key) {
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

// Sends rank 0's text to every rank.
std::string broadcast_text(Communicator& comm, const std::string& text, c10::Device device) {
  if (comm.world_size() == 1) return text;
  std::vector<at::Tensor> length{at::tensor({static_cast<std::int64_t>(text.size())}, at::kLong).to(device)};
  comm.broadcast(length, 0);
  const std::int64_t size = length[0].cpu().item<std::int64_t>();
  if (size == 0) return {};
  at::Tensor bytes = at::empty({size}, at::kByte);
  if (comm.rank() == 0) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  std::vector<at::Tensor> payload{bytes.to(device)};
  comm.broadcast(payload, 0);
  at::Tensor received = payload[0].cpu();
  return std::string(static_cast<const char*>(received.data_ptr()), static_cast<std::size_t>(size));
}

}  // namespace

void fail_after_rank0(Communicator& comm, const Error& error) {
  // Rank 0 is about to exit with the real error; block in a collective it never joins: it fails the moment rank
  // 0's process is gone, and the launcher has seen rank 0's exit first.
  try {
    comm.barrier();
  } catch (const std::exception&) {}
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  throw error;
}

// Rank 0's background writer: at most one checkpoint in flight.
class Checkpointer::Writer {
 public:
  Writer(const CheckpointConfig& config, std::string dir, bool async)
      : config_(config), dir_(std::move(dir)), async_(async) {
    if (async_) thread_ = std::thread([this] { run(); });
  }

  ~Writer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  bool busy() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pending_;
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !pending_; });
  }

  // The snapshot buffer, for the caller to fill while no write is in flight.
  StateSnapshot& snapshot() { return snapshot_; }

  struct Job {
    std::int64_t step = 0;
    std::string reason;
    std::map<std::string, std::string> metadata;
    std::optional<std::pair<double, bool>> metric;  // value, larger is better
    double stall_s = 0;                             // how long training waited for the snapshot
  };

  void submit(Job job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = std::move(job);
      pending_ = true;
    }
    if (!async_) {
      write_pending();
      return;
    }
    changed_.notify_all();
  }

  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !error_.empty();
  }

  std::string take_error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(error_, std::string());
  }

 private:
  void run() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return stopping_ || pending_; });
        if (!pending_) return;
      }
      write_pending();
    }
  }

  void write_pending() {
    const auto start = Clock::now();
    const std::string name = checkpoint_file_name(job_.step);
    const std::string path = dir_ + "/" + name;
    std::string error;
    try {
      std::vector<TensorRecord> records;
      for (const TensorView& view : snapshot_.views())
        records.push_back(TensorRecord{view.name, view.dtype, view.shape, view.data, view.nbytes});
      write_checkpoint_file(path, job_.metadata, records);
      const double file_seconds = seconds_since(start);  // the file itself: temp file, fsync, rename, dir fsync
      update_latest_pointer(dir_, name);
      std::set<std::string> protect;
      if (config_.best_metric != BestMetric::None) {
        auto best = read_best_pointer(dir_);
        if (job_.metric) {
          const auto [value, larger_is_better] = *job_.metric;
          const bool better = !best || best->metric != name_of(config_.best_metric) ||
                              (larger_is_better ? value > best->value : value < best->value);
          if (better) best = BestCheckpoint{name, std::string(name_of(config_.best_metric)), value};
          if (better) update_best_pointer(dir_, *best);
        }
        if (best) protect.insert(best->file_name);
      }
      prune_checkpoints(dir_, static_cast<int>(config_.keep_last), protect);
      const double seconds = seconds_since(start);
      log::progress(
          "checkpoint ({}) step {}: {}, {:.1f} MB; training paused {:.1f} ms, written in {:.2f} s ({:.0f} MB/s), "
          "with latest/best/prune {:.2f} s",
          job_.reason, job_.step, path, static_cast<double>(snapshot_.size()) / 1e6, job_.stall_s * 1000.0,
          file_seconds, static_cast<double>(snapshot_.size()) / 1e6 / std::max(file_seconds, 1e-9), seconds);
    } catch (const std::exception& e) {
      error = fmt::format("could not write checkpoint {}: {}", path, e.what());
      log::error("{}", error);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_ = false;
      if (!error.empty()) error_ = error;
    }
    changed_.notify_all();
  }

  const CheckpointConfig& config_;
  std::string dir_;
  bool async_;
  StateSnapshot snapshot_;
  Job job_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool pending_ = false;
  bool stopping_ = false;
  std::string error_;
  std::thread thread_;  // last: starts once everything above exists
};

Checkpointer::Checkpointer(const Config& config, std::string resolved_config, Communicator& comm, Model& model,
                           torch::optim::Optimizer& optimizer, c10::Device device)
    : config_(config),
      resolved_config_(std::move(resolved_config)),
      comm_(comm),
      model_(model),
      optimizer_(optimizer),
      device_(device),
      enabled_(!config.checkpoint.dir.empty()),
      dir_(config.checkpoint.dir),
      last_save_(Clock::now()) {
  if (enabled_ && comm_.rank() == 0) {
    create_checkpoint_directory(dir_);
    for (const auto& stale : remove_stale_temp_files(dir_)) {
      log::progress("removed {}/{}, left by a checkpoint write that was interrupted", dir_, stale);
    }
    writer_ = std::make_unique<Writer>(config_.checkpoint, dir_, config_.checkpoint.async);
  }
}

Checkpointer::~Checkpointer() = default;

std::string Checkpointer::choose_checkpoint() const {
  const std::string& resume = config_.checkpoint.resume;
  // auto: the newest valid file of checkpoint.dir (none: start from scratch); a PATH names a file, a `latest` or
  // `best` pointer or a directory (resolve_checkpoint, the rule `mgtrain export` follows too) and must be valid.
  if (resume == "auto") {
    const NewestValidCheckpoint newest = newest_valid_checkpoint(dir_);
    for (const std::string& note : newest.notes) log::warn("skipping damaged checkpoint: {}", note);
    if (!newest.chosen && !newest.notes.empty())
      log::warn("none of the {} checkpoints in {} is valid; starting from scratch", newest.notes.size(), dir_);
    return newest.chosen ? newest.chosen->path : "";
  }
  ResolvedCheckpoint chosen;
  try {
    chosen = resolve_checkpoint(resume);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("checkpoint.resume: {}", e.what()));
  }
  for (const std::string& note : chosen.notes) log::warn("skipping damaged checkpoint: {}", note);
  if (chosen.path.empty()) throw UsageError(fmt::format("checkpoint.resume: {} holds no valid checkpoint", resume));
  const std::string problem = verify_checkpoint_file(chosen.path);
  if (!problem.empty()) throw UsageError(fmt::format("checkpoint.resume: {}", problem));
  if (!chosen.how.empty()) log::progress("checkpoint.resume: {} is {}", resume, chosen.how);
  return chosen.path;
}

std::string Checkpointer::agree_on_checkpoint() {
  std::string chosen;
  std::string refusal;  // rank 0: why checkpoint.resume cannot be used; every rank then exits 2
  if (comm_.rank() == 0) try {
      chosen = choose_checkpoint();
    } catch (const UsageError& e) {
      refusal = e.what();
    }
  // One message: "path" to resume from, "" for none, or "!" + why rank 0 refused.
  const std::string decision = broadcast_text(comm_, refusal.empty() ? chosen : "!" + refusal, device_);
  if (!decision.empty() && decision[0] == '!') {
    if (comm_.rank() == 0) throw UsageError(refusal);
    fail_after_rank0(comm_, UsageError(fmt::format("rank 0 refused checkpoint.resume: {}", decision.substr(1))));
  }
  return decision;
}

CheckpointFile Checkpointer::read_chosen(const std::string& chosen) const {
  try {
    return read_checkpoint_file(chosen);
  } catch (const Error& e) {
    if (comm_.rank() == 0) throw;
    throw Error(
        fmt::format("rank {} cannot read the checkpoint rank 0 chose ({}); checkpoint.dir must be on a file "
                    "system every node sees: {}",
                    comm_.rank(), chosen, e.what()));
  }
}

void Checkpointer::report_resume(const std::string& chosen, const CheckpointFile& file, const TrainPosition& at,
                                 std::int64_t saved_world, double seconds) const {
  log::progress("resumed from {}: step {}, epoch {}, {} samples into the epoch ({:.2f} s)", chosen, at.step,
                at.epoch + 1, at.samples_in_epoch, seconds);
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

std::optional<TrainPosition> Checkpointer::resume() {
  const std::string& resume = config_.checkpoint.resume;
  if (!enabled_ && resume == "auto") return std::nullopt;
  if (resume == "never") return std::nullopt;
  // Rank 0 chooses; everyone reads the same file (checkpoint.dir must be visible to every host).
  const std::string chosen = agree_on_checkpoint();
  if (chosen.empty()) return std::nullopt;

  const auto start = Clock::now();
  const CheckpointFile file = read_chosen(chosen);
  std::vector<TensorView> views;
  for (const TensorEntry& entry : file.tensors())
    views.push_back(TensorView{entry.name, entry.dtype, entry.shape, file.bytes(entry), entry.nbytes});
  TensorViewMap stored(std::move(views));
  if (auto saved = file.metadata().find("mgtrain.optimizer");
      saved != file.metadata().end() && saved->second != name_of(config_.optim.name)) {
    throw UsageError(
        fmt::format("checkpoint {} was saved with optim.name {}, this run uses {}: its optimizer state does not "
                    "fit (set optim.name: {} or checkpoint.resume: never)",
                    chosen, saved->second, config_.optim.name, saved->second));
  }
  restore_train_state(model_, optimizer_, stored);
  if (scaler_ && scaler_->enabled()) scaler_->restore(stored);  // the same on every rank: all decide alike

  const std::int64_t saved_world = metadata_int(file, "mgtrain.world_size");
  TrainPosition at;
  at.step = metadata_int(file, "mgtrain.step");
  at.epoch = metadata_int(file, "mgtrain.epoch");
  at.samples_in_epoch = metadata_int(file, "mgtrain.samples_in_epoch");
  // Each rank continues its own random stream; a rank the saved run did not have takes rank (r mod saved world)'s.
  restore_rng_state(stored, rank_prefix(comm_.rank() % static_cast<int>(std::max<std::int64_t>(saved_world, 1))));
  if (comm_.rank() == 0) report_resume(chosen, file, at, saved_world, seconds_since(start));
  return at;
}

bool Checkpointer::agree_to_skip() {
  // Rank 0 decides whether to wait for or skip a write in flight; everyone follows.
  bool skip = false;
  if (comm_.rank() == 0 && writer_->busy()) {
    if (config_.checkpoint.when_busy == WhenBusy::Skip)
      skip = true;
    else
      writer_->wait_idle();
  }
  if (comm_.world_size() > 1) {
    std::vector<at::Tensor> flag{at::tensor({skip ? 1 : 0}, at::kInt).to(device_)};
    comm_.broadcast(flag, 0);
    skip = flag[0].cpu().item<int>() != 0;
  }
  return skip;
}

at::Tensor Checkpointer::gather_rng_rows(const NamedTensors& rng) {
  // Every rank's RNG state, gathered into rank 0 through one summed buffer (each rank fills its own row).
  std::int64_t row = 0;
  for (const auto& [name, state] : rng) row += state.numel();
  at::Tensor rows = at::zeros({comm_.world_size(), row}, at::kByte);
  std::int64_t offset = 0;
  for (const auto& [name, state] : rng) {
    rows[comm_.rank()].narrow(0, offset, state.numel()).copy_(state.reshape({-1}));
    offset += state.numel();
  }
  if (comm_.world_size() > 1) {
    at::Tensor on_device = rows.to(device_);
    comm_.allreduce_sum(on_device);
    rows = on_device.cpu();
  }
  return rows;
}

NamedTensors Checkpointer::state_to_save(const NamedTensors& rng, const at::Tensor& rng_rows) {
  NamedTensors state = capture_train_state(model_, optimizer_);
  if (scaler_ && scaler_->enabled()) {
    for (auto& entry : scaler_->state()) state.push_back(std::move(entry));
  }
  for (int r = 0; r < comm_.world_size(); ++r) {
    std::int64_t offset = 0;
    for (const auto& [name, one] : rng) {
      state.emplace_back(rank_prefix(r) + name, rng_rows[r].narrow(0, offset, one.numel()).view(one.sizes()));
      offset += one.numel();
    }
  }
  return state;
}

std::map<std::string, std::string> Checkpointer::metadata_for(const TrainPosition& at, const std::string& reason,
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

bool Checkpointer::save(const TrainPosition& at, const std::string& reason, const EvalResult* eval) {
  if (!enabled_) return false;
  const auto start = Clock::now();
  if (agree_to_skip()) {
    if (comm_.rank() == 0) {
      log::progress(
          "checkpoint at step {} skipped: the previous one is still being written (checkpoint.when_busy: skip)",
          at.step);
    }
    return false;
  }
  const NamedTensors rng = capture_rng_state();
  const at::Tensor rng_rows = gather_rng_rows(rng);
  if (comm_.rank() != 0) {
    last_save_ = Clock::now();
    return true;
  }
  const NamedTensors state = state_to_save(rng, rng_rows);
  const auto copy_start = Clock::now();
  writer_->snapshot().take(state);  // training waits only for this copy; the writer thread does the rest
  const double copy = seconds_since(copy_start);
  const double stall = seconds_since(start);
  if (const char* bench = std::getenv("MGTRAIN_BENCH_CHECKPOINT_COPY"); bench && std::string(bench) == "1") {
    // scripts/bench/checkpoint.sh: the reference the stall is compared with, a plain clone of the same state.
    const auto clone_start = Clock::now();
    std::vector<at::Tensor> clones;
    for (const auto& [name, tensor] : state) clones.push_back(tensor.clone());
    log::progress("bench: checkpoint stall {:.2f} ms, snapshot copy {:.2f} ms, plain clone {:.2f} ms, {:.1f} MB",
                  stall * 1000.0, copy * 1000.0, seconds_since(clone_start) * 1000.0,
                  static_cast<double>(writer_->snapshot().size()) / 1e6);
  }
  Writer::Job job;
  job.step = at.step;
  job.reason = reason;
  job.metric = metric_value(config_.checkpoint.best_metric, eval);
  job.stall_s = stall;
  job.metadata = metadata_for(at, reason, eval);
  writer_->submit(std::move(job));
  last_save_ = Clock::now();
  return true;
}

bool Checkpointer::save_due_by_time() const {
  const double minutes = config_.checkpoint.every_minutes;
  return enabled_ && minutes > 0 && seconds_since(last_save_) >= minutes * 60.0;
}

bool Checkpointer::write_failed() const { return writer_ && writer_->failed(); }

std::string Checkpointer::take_write_error() { return writer_ ? writer_->take_error() : std::string(); }

void Checkpointer::wait_for_writes() {
  if (writer_) writer_->wait_idle();
}

}  // namespace mgtrain
