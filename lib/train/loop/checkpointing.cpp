// Saving and resuming checkpoints for the trainer (see checkpointing.hpp).
#include "train/loop/checkpointing.hpp"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "train/state/train_state.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

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

// Sends rank 0's text to every rank.
std::string broadcast_text(Communicator& comm, const std::string& text) {
  at::Tensor bytes;
  if (comm.rank() == 0) {
    bytes = at::empty({static_cast<std::int64_t>(text.size())}, at::kByte);
    if (!text.empty()) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  }
  const at::Tensor received = broadcast_bytes(comm, bytes, 0);
  const auto* begin = static_cast<const char*>(received.data_ptr());
  return std::string(begin, begin + received.numel());
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

Checkpointer::Checkpointer(const Config& config, CheckpointContent& content, Communicator& comm)
    : config_(config),
      content_(content),
      comm_(comm),
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

Checkpointer::Choice Checkpointer::choose_checkpoint() const {
  const std::string& resume = config_.checkpoint.resume;
  // auto: the newest valid file of checkpoint.dir (none: start from scratch); a PATH names a file, a `latest` or
  // `best` pointer or a directory (resolve_checkpoint, the rule `mgtrain export` follows too) and must be valid.
  if (resume == "auto") {
    if (!enabled_) return {};
    const NewestValidCheckpoint newest = newest_valid_checkpoint(dir_);
    for (const std::string& note : newest.notes) log::warn("skipping damaged checkpoint: {}", note);
    if (!newest.chosen && !newest.notes.empty())
      log::warn("none of the {} checkpoints in {} is valid; starting from scratch", newest.notes.size(), dir_);
    if (!newest.chosen) return {};
    return {newest.chosen->path, newest.chosen->step};
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
  return {chosen.path, -1};  // its step: read only when a snapshot in memory competes with it
}

std::string Checkpointer::agree_on_checkpoint(const std::optional<MemorySnapshots::Newest>& in_memory) {
  // One message from rank 0: "F" + the file to resume from, "M" for the snapshot in memory, "N" for none, or
  // "!" + why rank 0 refused checkpoint.resume (every rank then exits 2).
  std::string decision;
  if (comm_.rank() == 0) try {
      Choice chosen = choose_checkpoint();
      if (in_memory && !chosen.path.empty() && chosen.step < 0)
        chosen.step = CheckpointContent::metadata_int(read_checkpoint_file(chosen.path), "mgtrain.step");
      if (in_memory && in_memory->step >= chosen.step) {
        decision.push_back('M');  // not = "M": GCC 12 -O3 warns wrongly (stringop-overflow)
        if (!chosen.path.empty()) {
          log::progress("the snapshot in memory (step {}) is newer than {} (step {}): resuming from memory",
                        in_memory->step, chosen.path, chosen.step);
        }
      } else {
        decision = chosen.path.empty() ? "N" : "F" + chosen.path;
        if (in_memory) {
          log::progress("the snapshot in memory (step {}) is older than {} (step {}): resuming from the file",
                        in_memory->step, chosen.path, chosen.step);
        }
      }
    } catch (const UsageError& e) {
      decision = "!" + std::string(e.what());
    }
  decision = broadcast_text(comm_, decision);
  if (!decision.empty() && decision[0] == '!') {
    if (comm_.rank() == 0) throw UsageError(decision.substr(1));
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

std::optional<TrainPosition> Checkpointer::resume(MemorySnapshots& memory,
                                                  const std::optional<MemorySnapshots::Newest>& in_memory) {
  const std::string& resume = config_.checkpoint.resume;
  if (resume == "never") return std::nullopt;
  if (!enabled_ && resume == "auto" && !in_memory) return std::nullopt;
  // Rank 0 chooses; everyone reads the same file (checkpoint.dir must be visible to every host).
  const std::string decision = agree_on_checkpoint(in_memory);
  if (decision == "M") {
    resumed_from_ = StartSource::kSnapshot;
    return memory.restore(*in_memory);
  }
  if (decision.size() < 2 || decision[0] != 'F') return std::nullopt;
  const std::string chosen = decision.substr(1);
  const auto start = Clock::now();
  const CheckpointFile file = read_chosen(chosen);
  resumed_from_ = StartSource::kCheckpoint;
  return content_.restore(file, chosen, seconds_since(start));
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
    std::vector<at::Tensor> flag{at::tensor({skip ? 1 : 0}, at::kInt)};  // NCCL: through the GPU (communicator)
    comm_.broadcast(flag, 0);
    skip = flag[0].item<int>() != 0;
  }
  return skip;
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
  const CheckpointContent::RngRows rng = content_.gather_rng_rows();
  if (comm_.rank() != 0) {
    last_save_ = Clock::now();
    return true;
  }
  const NamedTensors state = content_.tensors(rng);
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
  job.metadata = content_.metadata(at, reason, eval);
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
