// One rank's training loop (see trainer.hpp).
#include "train/loop/trainer.hpp"
#include "util/json_text.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <thread>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <nlohmann/json.hpp>

#include "config/config_yaml.hpp"
#include "train/data/batch_loader.hpp"
#include "train/data/data_source.hpp"
#include "train/data/distributed_sampler.hpp"
#include "train/loop/checkpointing.hpp"
#include "train/loop/grad_scaler.hpp"
#include "train/loop/lr_schedule.hpp"
#include "train/loop/mixed_precision.hpp"
#include "train/loop/multi_tensor_step.hpp"
#include "train/loop/optimizer_factory.hpp"
#include "train/loop/stop_request.hpp"
#include "train/loop/training_reporter.hpp"
#include "train/loop/training_setup.hpp"
#include "train/models/model.hpp"
#include "train/parallel/data_parallel.hpp"
#include "train/parallel/device_setup.hpp"
#include "train/parallel/gradient_reducer.hpp"
#include "train/parallel/step_agreement.hpp"
#include "train/parallel/sync_batch_norm.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

// Test hook (tests/diagnosis/test_hang.cpp): MGTRAIN_TEST_HANG_AT="<rank>:<step>" makes that rank block for good
// after that step, as a rank stuck outside any collective would; the other ranks then wait in the next all-reduce.
std::optional<std::int64_t> test_hang_step(int rank) {
  const char* text = std::getenv("MGTRAIN_TEST_HANG_AT");
  int hang_rank = -1;
  long long step = -1;
  if (text == nullptr || std::sscanf(text, "%d:%lld", &hang_rank, &step) != 2 || hang_rank != rank) return std::nullopt;
  return step;
}

[[gnu::noinline]] void test_hook_hang_here() {
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

using Clock = std::chrono::steady_clock;

// Each rank evaluates its own slice (rank, rank+W, ...: no padding, so every sample counts once) and
// the sums are all-reduced.
EvalResult evaluate(Model& model, const DataSource& test, Communicator& comm, const Config& config,
                    const torch::Device& device) {
  at::NoGradGuard no_grad;
  model.train(false);
  BatchLoader loader(test, DistributedSampler::evaluation_shard(test.size(), comm.world_size(), comm.rank()),
                     config.train.batch_size, /*drop_last=*/false, static_cast<int>(config.data.loader_threads),
                     static_cast<int>(config.data.prefetch_batches), 0, /*pin_memory=*/device.is_cuda());
  double loss_sum = 0.0, correct = 0.0, count = 0.0;
  while (auto batch = loader.next()) {
    at::Tensor inputs = batch->inputs.to(device), targets = batch->targets.to(device);
    at::Tensor logits;
    {
      AutocastScope autocast(resolve_precision(config.train.precision, device), device);
      logits = model.forward(inputs);
    }
    logits = logits.to(at::kFloat);
    const double n = static_cast<double>(targets.numel());
    loss_sum += model.loss(logits, targets).item<double>() * n;
    correct += logits.argmax(-1).eq(targets).sum().item<double>();
    count += n;
  }
  at::Tensor totals = at::tensor({loss_sum, correct, count}, at::kDouble);
  comm.allreduce_sum(totals);
  model.train(true);
  EvalResult result;
  const double total = totals[2].item<double>();
  result.samples = static_cast<std::int64_t>(total);
  if (total > 0) {
    result.loss = totals[0].item<double>() / total;
    result.accuracy = totals[1].item<double>() / total;
  }
  return result;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
  return values[values.size() / 2];
}

// Step times after the warm-up steps, and the loss window of rank 0's reports.
class StepStatistics {
 public:
  StepStatistics(std::int64_t total_steps, std::int64_t first_step, std::int64_t samples_per_step)
      : warmup_(std::min<std::int64_t>(10, std::max<std::int64_t>(total_steps / 5, 1))),
        first_step_(first_step),
        samples_per_step_(samples_per_step),
        loop_start_(Clock::now()) {}

  void add(std::int64_t step, double seconds, double loss) {
    if (step > warmup_) {
      timed_seconds_ += seconds;
      ++timed_steps_;
      step_times_.push_back(seconds);
    }
    window_loss_ += loss;
    ++window_count_;
  }
  // The mean loss since the last call, which starts a new window.
  double take_window_loss() {
    const double mean = window_loss_ / static_cast<double>(window_count_);
    window_loss_ = 0.0;
    window_count_ = 0;
    return mean;
  }
  bool window_open() const { return window_count_ > 0; }
  // Samples/s over the timed steps, or since the loop started while still warming up.
  double samples_per_s_so_far(std::int64_t step) const {
    return timed_steps_ > 0
               ? samples_per_s()
               : static_cast<double>((step - first_step_) * samples_per_step_) / seconds_since(loop_start_);
  }
  double samples_per_s() const {
    return timed_seconds_ > 0 ? static_cast<double>(timed_steps_ * samples_per_step_) / timed_seconds_ : 0.0;
  }
  double median_step_ms() const { return median(step_times_) * 1000.0; }

 private:
  std::int64_t warmup_, first_step_, samples_per_step_;
  Clock::time_point loop_start_;
  std::vector<double> step_times_;
  double timed_seconds_ = 0.0;
  std::int64_t timed_steps_ = 0;
  double window_loss_ = 0.0;
  std::int64_t window_count_ = 0;
};

// The epochs `at` stands for: its whole epochs plus the share of the next one its samples are, given the samples of
// one epoch (all ranks); 3 decimals, rounded down so that an unfinished epoch never reads as a whole one.
double epochs_trained(const TrainPosition& at, std::int64_t samples_per_epoch) {
  // In thousandths, in integers: 0.64 is then the double nearest to 0.64, which JSON prints as 0.64.
  const std::int64_t share =
      samples_per_epoch > 0 ? std::clamp<std::int64_t>(at.samples_in_epoch * 1000 / samples_per_epoch, 0, 999) : 0;
  return static_cast<double>(at.epoch * 1000 + share) / 1000.0;
}

// One rank's run over the set-up model: epochs of steps, the ranks' agreement after each step (stop, save),
// evaluation, checkpoints and reports. run() reads top to bottom; each part of a step has a name below.
class TrainingRun {
 public:
  TrainingRun(const Config& config, Communicator& comm, HeartbeatWriter& heartbeat, TrainingSetup& setup)
      : config_(config),
        train_(config.train),
        comm_(comm),
        heartbeat_(heartbeat),
        s_(setup),
        leader_(comm.rank() == 0),
        accum_(config.train.grad_accum_steps),
        samples_per_step_(config.train.batch_size * accum_ * comm.world_size()),
        gradient_scale_(1.0 / static_cast<double>(accum_ * comm.world_size())),
        scaler_({setup.precision.loss_scaling, train_.loss_scale_init, train_.loss_scale_growth_factor,
                 train_.loss_scale_backoff_factor,
                 train_.loss_scale_growth_interval}),  // fp16 only; else scale 1, no checks
        agreement_(comm),
        test_hang_step_(test_hang_step(comm.rank())) {}

  TrainSummary run(Clock::time_point run_start) {
    describe_summary();
    announce_start();
    resume_from_checkpoint();
    // Where this run starts and from which copy: the launcher counts a restart's lost steps by it and reports both.
    heartbeat_.set_start(step_, checkpoints_->resumed_from());
    if (const std::optional<MemorySnapshots::Held> held = snapshots_->held()) {
      heartbeat_.set_snapshot(held->step, held->unix_time);
    }
    heartbeat_.beat(0);
    // Rank 0's progress display, eval lines, metrics.jsonl and TensorBoard files (log.*).
    reporter_.emplace(config_, comm_.rank(), s_.total_steps, samples_per_step_, s_.device.is_cuda(),
                      current_environment());
    stats_.emplace(s_.total_steps, step_, samples_per_step_);
    const std::int64_t first_step = step_;
    for (; step_ < s_.total_steps && !summary_.stop_signal; ++epoch_, consumed_ = 0) run_epoch();
    if (!summary_.stop_signal && step_ == s_.total_steps && s_.total_steps > first_step) finish_last_step();
    reporter_->finish();
    wait_for_last_checkpoint();
    if (stats_->window_open()) summary_.final_train_loss = stats_->take_window_loss();
    comm_.barrier();  // rank 0 hosts the store: nobody leaves before everyone is done
    fill_summary(run_start);
    return summary_;
  }

 private:
  void describe_summary() {
    summary_.world_size = comm_.world_size();
    summary_.model = s_.model->summary();
    summary_.device = s_.device.str();
    summary_.backend = comm_.backend_name();
  }

  void announce_start() {
    if (!leader_) return;
    log::progress("{}{} | world {} ({}) on {}, precision {} | {}", summary_.model,
                  sync_batch_norm_note(s_.synchronised_batch_norms), comm_.world_size(), summary_.backend,
                  summary_.device, s_.precision.mode, s_.train_data->description());
    log::progress("{} steps ({} per epoch), batch {} x {} accum x {} ranks", s_.total_steps, s_.steps_per_epoch,
                  train_.batch_size, accum_, comm_.world_size());
  }

  // Checkpoints: resume first (model, optimizer, loss scale, RNG and position), then save as the policy says.
  void resume_from_checkpoint() {
    content_.emplace(config_, config_to_yaml(config_), comm_, *s_.model, *s_.optimizer);
    content_->attach_grad_scaler(&scaler_);
    checkpoints_.emplace(config_, *content_, comm_);
    snapshots_.emplace(config_.checkpoint, *content_, comm_);
    const std::optional<MemorySnapshots::Newest> in_memory = snapshots_->survey();
    const std::optional<TrainPosition> resumed = checkpoints_->resume(*snapshots_, in_memory);
    if (checkpoints_->enabled())
      stop_requests_.emplace();  // SIGTERM/SIGUSR1: save, then exit 75
    else
      StopRequestHandler::release_early_warning();  // nothing to save: SIGUSR1 stops the worker as before
    if (!resumed) return;
    step_ = resumed->step;
    epoch_ = resumed->epoch;
    consumed_ = resumed->samples_in_epoch;
    last_saved_step_ = step_;
    current_ = *resumed;
    if (leader_ && step_ >= s_.total_steps) {
      log::progress(
          "nothing left to train: the checkpoint is at step {} of {} (raise train.max_steps or train.epochs to go on, "
          "or set checkpoint.resume: never to start over)",
          step_, s_.total_steps);
    }
  }

  // The rest of the epoch (all of it unless resuming mid-epoch), re-sharded if the world size changed.
  void run_epoch() {
    std::vector<std::int64_t> indices = s_.sampler->indices_after(epoch_, consumed_);
    const auto remaining = static_cast<std::int64_t>(indices.size());
    const std::int64_t batch = train_.batch_size;
    const std::int64_t steps_this_epoch =
        (config_.data.drop_last ? remaining / batch : (remaining + batch - 1) / batch) / accum_;
    BatchLoader loader(*s_.train_data, std::move(indices), batch, config_.data.drop_last,
                       static_cast<int>(config_.data.loader_threads), static_cast<int>(config_.data.prefetch_batches),
                       0,
                       /*pin_memory=*/s_.device.is_cuda());
    for (std::int64_t s = 0; s < steps_this_epoch && step_ < s_.total_steps; ++s) {
      const auto step_start = Clock::now();
      agreement_.begin(my_votes());
      const double loss = train_step(loader);
      heartbeat_.beat(step_, loss, collective_wait_seconds());
      if (test_hang_step_ && step_ >= *test_hang_step_) {
        heartbeat_.flush();  // as a rank that blocks later in the step would have reported this step
        test_hook_hang_here();
      }
      const bool epoch_done = s + 1 == steps_this_epoch;
      current_ = TrainPosition{step_, epoch_done ? epoch_ + 1 : epoch_, epoch_done ? 0 : consumed_};
      if (act_on_votes(agreement_.finish())) return;  // stopped after a checkpoint
      record_step(seconds_since(step_start), loss);
      if (train_.eval_every_steps > 0 && step_ % train_.eval_every_steps == 0) run_eval("periodic");
      if (epoch_done) finish_epoch();
    }
  }

  // The seconds this rank has waited for the others in the step's collectives (the gradients' all-reduce, the
  // vote), for the heartbeat: straggler detection compares the ranks' time outside them (docs/diagnosis.md).
  // Not on a GPU: NCCL's Work::wait returns before the collective is done, so the host would not see the wait.
  std::optional<double> collective_wait_seconds() const {
    if (s_.device.is_cuda() || comm_.single_process()) return std::nullopt;
    return s_.reducer->wait_seconds() + agreement_.wait_seconds();
  }

  // What this rank says before the step: the ranks agree on it after the step (step_agreement.hpp).
  StepVotes my_votes() {
    StepVotes mine;
    mine.stop = StopRequestHandler::requested() != 0;
    mine.save_due = leader_ && checkpoints_->save_due_by_time();
    mine.writer_failed = leader_ && checkpoints_->write_failed();
    mine.save_requested = SaveRequest::pending();
    return mine;
  }

  // One optimizer step: accum micro-batches of forward and backward (the reducer all-reduces each gradient
  // bucket as soon as it is ready, overlapped with the rest of backward), then unscale, clip and step.
  // Returns the step's mean loss.
  double train_step(BatchLoader& loader) {
    // Read back to the host once, after the optimizer step: a read after each backward would stop the CPU from
    // queueing the step's remaining kernels while the GPU still runs the backward.
    at::Tensor step_loss = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(s_.device));
    for (std::int64_t micro = 0; micro < accum_; ++micro) {
      auto batch = loader.next();
      if (!batch) throw Error("internal error: the loader ran out of batches before the epoch's last step");
      if (micro == 0 && config_.ddp.broadcast_buffers && !s_.buffers.empty()) comm_.broadcast_coalesced(s_.buffers, 0);
      s_.reducer->begin_backward(/*sync=*/micro == accum_ - 1);
      at::Tensor inputs = batch->inputs.to(s_.device, /*non_blocking=*/true);
      at::Tensor targets = batch->targets.to(s_.device, /*non_blocking=*/true);
      at::Tensor logits;
      {
        AutocastScope autocast(s_.precision, s_.device);  // train.precision: the forward in bf16/fp16, the loss in fp32
        logits = s_.model->forward(inputs);
      }
      at::Tensor loss = s_.model->loss(logits.to(at::kFloat), targets);
      // Dividing the loss by accum x world makes the summed, all-reduced gradient the mean over every sample of
      // the step, without a separate pass over the gradients (exact for power-of-two worlds).
      (loss * (gradient_scale_ * scaler_.scale())).backward();
      step_loss.add_(loss.detach(), 1.0 / static_cast<double>(accum_));
    }
    s_.reducer->finish_backward();
    // fp16: unscale before clipping; a step with inf/nan gradients is skipped, alike on every rank (grad_scaler.hpp).
    const bool found_inf = scaler_.unscale_and_check(s_.parameters);
    // Both over all parameters at once, with no read back (multi_tensor_step.hpp).
    if (train_.clip_grad_norm > 0 && !found_inf) clip_grad_norm(s_.parameters, train_.clip_grad_norm);
    set_learning_rate(*s_.optimizer, s_.schedule->at(step_));
    if (scaler_.update(found_inf)) multi_tensor_step(*s_.optimizer);
    s_.reducer->zero_grad();
    ++step_;
    consumed_ += samples_per_step_;
    return step_loss.item<double>();
  }

  // The agreed votes: a failed checkpoint write, a stop (save, then leave: returns true), a save that is due
  // or was asked for (SIGUSR2).
  bool act_on_votes(const StepVotes& votes) {
    if (votes.writer_failed) handle_failed_write();
    if (votes.stop) {
      StopRequestHandler::stop_agreed();  // late copies of the signal (SLURM, the launcher) must not kill us now
      save(current_, "stop requested");
      checkpoints_->wait_for_writes();
      if (leader_ && checkpoints_->write_failed()) throw Error(checkpoints_->take_write_error());
      summary_.stop_signal = StopRequestHandler::requested() ? StopRequestHandler::requested() : SIGTERM;
      return true;
    }
    if ((config_.checkpoint.every_steps > 0 && step_ % config_.checkpoint.every_steps == 0) || votes.save_due) {
      save(current_, votes.save_due ? "every_minutes" : "every_steps");
    }
    if (snapshots_->due(step_)) {
      if (snapshots_->take_prints()) reporter_->before_message();  // its line, not the progress bar's
      if (snapshots_->take(current_)) heartbeat_.set_snapshot(step_, unix_seconds_now());
    }
    if (votes.save_requested) {  // SIGUSR2 on some rank: save now and go on
      SaveRequest::clear();      // every rank: one save for the signals that arrived up to this step
      if (!checkpoints_->enabled()) {
        if (leader_)
          log::warn(
              "SIGUSR2 asked for a checkpoint at step {}, but checkpoints are off (checkpoint.dir is empty); "
              "training goes on",
              step_);
      } else if (last_saved_step_ != step_) {
        save(current_, "requested");
      }
    }
    return false;
  }

  void handle_failed_write() {
    const std::string error = leader_ ? checkpoints_->take_write_error() : std::string();
    if (config_.checkpoint.on_write_error == OnWriteError::Stop) {
      if (leader_) throw Error(fmt::format("{} (checkpoint.on_write_error: stop)", error));
      fail_after_rank0(
          comm_, Error("rank 0 could not write a checkpoint; stopping with it (checkpoint.on_write_error: stop)"));
    }
    if (leader_) log::warn("training goes on without that checkpoint (checkpoint.on_write_error: continue)");
  }

  // Step time and loss into the statistics, and rank 0's progress report.
  void record_step(double seconds, double loss) {
    stats_->add(step_, seconds, loss);
    if (!leader_) return;
    if (step_ % config_.log.every_steps == 0 || step_ == s_.total_steps)
      summary_.final_train_loss = stats_->take_window_loss();
    StepReport report;
    report.step = step_;
    report.epoch = epoch_ + 1;
    report.loss = loss;
    report.lr = s_.schedule->at(step_ - 1);
    report.step_time_s = seconds;
    report.samples_per_s = stats_->samples_per_s_so_far(step_);
    if (scaler_.enabled()) report.loss_scale = scaler_.scale();  // fp16: metrics row and train/loss_scale
    reporter_->on_step(report);
  }

  void finish_epoch() {
    if (train_.eval_at_epoch_end) run_eval("epoch end");
    const std::int64_t every = config_.checkpoint.every_epochs;
    if (every > 0 && (epoch_ + 1) % every == 0 && last_saved_step_ != step_) save(current_, "epoch end");
  }

  void finish_last_step() {
    if (train_.eval_at_epoch_end && evaluated_at_step_ != step_) run_eval("end");
    if (config_.checkpoint.at_end && last_saved_step_ != step_) save(current_, "end");
  }

  void wait_for_last_checkpoint() {
    checkpoints_->wait_for_writes();
    if (!leader_ || !checkpoints_->write_failed()) return;
    const std::string error = checkpoints_->take_write_error();
    if (config_.checkpoint.on_write_error == OnWriteError::Stop) throw Error(error);
    log::warn(
        "the last checkpoint was not written (checkpoint.on_write_error: continue); the newest one on disk is older");
  }

  void run_eval(const char* when) {
    summary_.eval = evaluate(*s_.model, *s_.test_data, comm_, config_, s_.device);
    if (s_.language_model) summary_.eval.perplexity = std::exp(summary_.eval.loss);
    summary_.has_eval = true;
    evaluated_at_step_ = step_;
    reporter_->on_eval(step_, summary_.eval, s_.language_model, when);
  }

  void save(const TrainPosition& at, const char* reason) {
    reporter_->before_message();
    if (checkpoints_->save(at, reason, summary_.has_eval ? &summary_.eval : nullptr)) last_saved_step_ = at.step;
  }

  void fill_summary(Clock::time_point run_start) {
    summary_.steps = step_;
    summary_.epochs = epochs_trained(current_, s_.steps_per_epoch * samples_per_step_);
    summary_.wall_s = seconds_since(run_start);
    summary_.samples_per_s = stats_->samples_per_s();
    summary_.step_time_ms = stats_->median_step_ms();
    summary_.precision = std::string(name_of(s_.precision.mode));
    summary_.loss_scaling = scaler_.enabled();
    summary_.loss_scale = scaler_.scale();
    summary_.skipped_steps = scaler_.skipped_steps();
    summary_.gpu_peak_mib = peak_gpu_memory_mib(s_.device);
  }

  const Config& config_;
  const TrainConfig& train_;
  Communicator& comm_;
  HeartbeatWriter& heartbeat_;
  TrainingSetup& s_;
  const bool leader_;
  const std::int64_t accum_, samples_per_step_;
  const double gradient_scale_;
  std::optional<CheckpointContent> content_;  // made after the start lines, with the checkpoints
  std::optional<Checkpointer> checkpoints_;   // made after the start lines: it may say what it cleaned up
  std::optional<MemorySnapshots> snapshots_;
  GradScaler scaler_;
  StepAgreement agreement_;
  std::optional<std::int64_t> test_hang_step_;  // MGTRAIN_TEST_HANG_AT, for tests only
  std::optional<StopRequestHandler> stop_requests_;
  std::optional<TrainingReporter> reporter_;
  std::optional<StepStatistics> stats_;
  TrainSummary summary_;
  std::int64_t step_ = 0, epoch_ = 0;
  std::int64_t consumed_ = 0;  // samples of this epoch taken by all ranks
  std::int64_t last_saved_step_ = -1, evaluated_at_step_ = -1;
  TrainPosition current_;
};

}  // namespace

TrainSummary run_training(const Config& config, const WorkerIdentity& id, Communicator& comm,
                          HeartbeatWriter& heartbeat) {
  const auto run_start = Clock::now();
  TrainingSetup setup = set_up_training(config, id, comm);
  return TrainingRun(config, comm, heartbeat, setup).run(run_start);
}

std::string summary_json_line(const TrainSummary& s) {
  nlohmann::ordered_json summary = {{"steps", s.steps},
                                    {"epochs", s.epochs},
                                    {"wall_s", s.wall_s},
                                    {"samples_per_s", s.samples_per_s},
                                    {"step_time_ms", s.step_time_ms},
                                    {"world_size", s.world_size},
                                    {"final_train_loss", s.final_train_loss},
                                    {"model", s.model},
                                    {"device", s.device},
                                    {"backend", s.backend},
                                    {"precision", s.precision}};
  if (s.gpu_peak_mib >= 0) summary["gpu_peak_mib"] = s.gpu_peak_mib;
  if (s.loss_scaling) {
    summary["loss_scale"] = s.loss_scale;
    summary["skipped_steps"] = s.skipped_steps;
  }
  if (s.has_eval) {
    nlohmann::ordered_json eval = {{"loss", s.eval.loss}, {"accuracy", s.eval.accuracy}};
    if (s.eval.perplexity > 0) eval["perplexity"] = s.eval.perplexity;
    eval["samples"] = s.eval.samples;
    summary["eval"] = std::move(eval);
  }
  return json_text(nlohmann::ordered_json{{"summary", std::move(summary)}});
}

}  // namespace mgtrain
