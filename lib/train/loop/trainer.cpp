// One rank's training loop (see trainer.hpp).
#include "train/loop/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include "util/error.hpp"
#include "util/json_writer.hpp"
#include "config/config_yaml.hpp"
#include "train/data/batch_loader.hpp"
#include "train/loop/checkpointing.hpp"
#include "train/dist/data_parallel.hpp"
#include "train/dist/device_setup.hpp"
#include "train/loop/grad_scaler.hpp"
#include "train/loop/mixed_precision.hpp"
#include "train/data/data_source.hpp"
#include "train/data/distributed_sampler.hpp"
#include "train/dist/gradient_reducer.hpp"
#include "train/loop/lr_schedule.hpp"
#include "train/models/model.hpp"
#include "train/loop/optimizer_factory.hpp"
#include "train/dist/step_agreement.hpp"
#include "train/loop/stop_request.hpp"
#include "train/loop/training_reporter.hpp"
#include "train/dist/sync_batch_norm.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

torch::Device pick_device(const TrainConfig& train, const WorkerIdentity& id) { return choose_training_device(train, id).device; }

// Each rank evaluates its own slice (rank, rank+W, ...: no padding, so every sample counts once) and
// the sums are all-reduced.
EvalResult evaluate(Model& model, const DataSource& test, Communicator& comm, const Config& config, const torch::Device& device) {
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

}  // namespace

TrainSummary run_training(const Config& config, const WorkerIdentity& id, Communicator& comm, HeartbeatWriter& heartbeat) {
  const auto run_start = Clock::now();
  const bool leader = comm.rank() == 0;
  const TrainConfig& train = config.train;
  const torch::Device device = pick_device(train, id);
  const Precision precision = resolve_precision(train.precision, device);  // fp16 on a CPU is refused here

  // Data: the same data set everywhere; the sampler gives each rank its shard.
  const bool language_model = config.model.type == ModelType::Gpt;
  auto train_data = open_data_source(config.data, Split::Train, config.model.context_length, static_cast<std::uint64_t>(train.seed));
  auto test_data = open_data_source(config.data, Split::Test, config.model.context_length, static_cast<std::uint64_t>(train.seed));
  DistributedSampler sampler(train_data->size(), comm.world_size(), comm.rank(), config.data.shuffle,
                             static_cast<std::uint64_t>(train.seed), config.data.drop_last);

  // Model: identical initialisation on every rank from the seed, then rank 0's copy is broadcast anyway.
  torch::manual_seed(static_cast<std::uint64_t>(train.seed));
  const ModelInput model_input{train_data->sample_shape(), train_data->num_classes()};
  auto model = config.ddp.strategy == Strategy::Dp  // legacy DataParallel: one process, the model replicated over its GPUs
                   ? build_data_parallel_model(config.model, model_input, data_parallel_devices(comm.world_size(), train.precision))
                   : build_model(config.model, model_input);
  model->to(device);
  const int synchronised_batch_norms = apply_sync_batch_norm(config.ddp, *model, comm);  // ddp.sync_batch_norm
  model->train(true);
  std::vector<at::Tensor> parameters, buffers;
  for (auto& [name, p] : model->named_parameters()) parameters.push_back(p);
  for (auto& [name, b] : model->named_buffers()) buffers.push_back(b);
  {
    std::vector<at::Tensor> state = parameters;
    state.insert(state.end(), buffers.begin(), buffers.end());
    comm.broadcast_coalesced(state, 0);
  }

  ReducerOptions reducer_options;
  reducer_options.bucket_cap_mb = config.ddp.bucket_cap_mb;
  reducer_options.first_bucket_mb = config.ddp.first_bucket_mb;
  reducer_options.find_unused_parameters = config.ddp.find_unused_parameters;
  reducer_options.gradient_as_bucket_view = config.ddp.gradient_as_bucket_view;
  reducer_options.skip_communication = config.ddp.skip_allreduce;
  reducer_options.gradients_prescaled = true;  // the loss is divided by the world size below
  GradientReducer reducer(model->named_parameters(), comm, reducer_options);

  const std::int64_t accum = train.grad_accum_steps;
  const std::int64_t batches_per_epoch =
      config.data.drop_last ? sampler.samples_per_rank() / train.batch_size
                            : (sampler.samples_per_rank() + train.batch_size - 1) / train.batch_size;
  const std::int64_t steps_per_epoch = batches_per_epoch / accum;
  if (steps_per_epoch < 1) {
    throw UsageError(fmt::format("train.batch_size {} x train.grad_accum_steps {} is more than this rank's {} samples per epoch "
                                 "({} in all over {} ranks): lower them",
                                 train.batch_size, accum, sampler.samples_per_rank(), train_data->size(), comm.world_size()));
  }
  const std::int64_t total_steps = train.max_steps > 0 ? train.max_steps : steps_per_epoch * train.epochs;
  const double peak_lr = config.optim.lr * (config.optim.scale_lr_with_world_size ? comm.world_size() : 1);
  LrSchedule schedule(config.optim, peak_lr, total_steps);
  auto optimizer = make_optimizer(config.optim, parameters, schedule.at(0));


  TrainSummary summary;
  summary.world_size = comm.world_size();
  summary.model = model->summary();
  summary.device = device.str();
  summary.backend = comm.backend_name();
  if (leader) {
    std::printf("mgtrain: %s%s | world %d (%s) on %s, precision %s | %s\nmgtrain: %lld steps (%lld per epoch), batch %lld x %lld accum x %d ranks\n",
                summary.model.c_str(),
                sync_batch_norm_note(synchronised_batch_norms).c_str(),
                comm.world_size(), summary.backend.c_str(), summary.device.c_str(), std::string(name_of(precision.mode)).c_str(),
                train_data->description().c_str(), static_cast<long long>(total_steps), static_cast<long long>(steps_per_epoch),
                static_cast<long long>(train.batch_size), static_cast<long long>(accum), comm.world_size());
    std::fflush(stdout);
  }
  // Checkpoints: resume first (model, optimizer, RNG and position), then save as the policy says.
  Checkpointer checkpoints(config, config_to_yaml(config), comm, *model, *optimizer, device);
  GradScaler scaler({precision.loss_scaling, train.loss_scale_init, train.loss_scale_growth_factor, train.loss_scale_backoff_factor,
                      train.loss_scale_growth_interval});  // fp16 only; otherwise scale 1 and no checks
  checkpoints.attach_grad_scaler(&scaler);
  const std::optional<TrainPosition> resumed = checkpoints.resume();
  std::optional<StopRequestHandler> stop_requests;  // SIGTERM/SIGUSR1: save, then exit 75
  if (checkpoints.enabled()) stop_requests.emplace();
  else StopRequestHandler::release_early_warning();  // nothing to save: SIGUSR1 stops the worker as before
  StepAgreement agreement(comm);
  heartbeat.beat(0);
  // Rank 0's progress display, eval lines, metrics.jsonl and TensorBoard files (log.*).
  TrainingReporter reporter(config, comm.rank(), total_steps, train.batch_size * accum * comm.world_size(), device.is_cuda(),
                            current_environment());

  const std::int64_t samples_per_step = train.batch_size * accum * comm.world_size();
  const double gradient_scale = 1.0 / static_cast<double>(accum * comm.world_size());
  const std::int64_t timing_warmup = std::min<std::int64_t>(10, std::max<std::int64_t>(total_steps / 5, 1));
  std::vector<double> step_times;
  double timed_seconds = 0.0;
  std::int64_t timed_steps = 0;
  double window_loss = 0.0;
  std::int64_t window_count = 0;
  std::int64_t step = resumed ? resumed->step : 0;
  const std::int64_t first_step = step;
  std::int64_t last_saved_step = resumed ? step : -1;
  std::int64_t evaluated_at_step = -1;
  TrainPosition current = resumed ? *resumed : TrainPosition{};
  const auto loop_start = Clock::now();

  auto run_eval = [&](const char* when) {
    summary.eval = evaluate(*model, *test_data, comm, config, device);
    if (language_model) summary.eval.perplexity = std::exp(summary.eval.loss);
    summary.has_eval = true;
    evaluated_at_step = step;
    reporter.on_eval(step, summary.eval, language_model, when);
  };

  auto save = [&](const TrainPosition& at, const char* reason) {
    reporter.before_message();
    if (checkpoints.save(at, reason, summary.has_eval ? &summary.eval : nullptr)) last_saved_step = at.step;
  };

  if (leader && resumed && step >= total_steps) {
    std::printf("mgtrain: nothing left to train: the checkpoint is at step %lld of %lld (raise train.max_steps or "
                "train.epochs to go on, or set checkpoint.resume: never to start over)\n",
                static_cast<long long>(step), static_cast<long long>(total_steps));
    std::fflush(stdout);
  }
  std::int64_t epoch = resumed ? resumed->epoch : 0;
  std::int64_t consumed = resumed ? resumed->samples_in_epoch : 0;  // samples of this epoch taken by all ranks
  for (; step < total_steps; ++epoch, consumed = 0) {
    // The rest of the epoch (all of it unless resuming mid-epoch), re-sharded if the world size changed.
    std::vector<std::int64_t> indices = sampler.indices_after(epoch, consumed);
    const auto remaining = static_cast<std::int64_t>(indices.size());
    const std::int64_t steps_this_epoch =
        (config.data.drop_last ? remaining / train.batch_size : (remaining + train.batch_size - 1) / train.batch_size) / accum;
    BatchLoader loader(*train_data, std::move(indices), train.batch_size, config.data.drop_last,
                       static_cast<int>(config.data.loader_threads), static_cast<int>(config.data.prefetch_batches), 0, /*pin_memory=*/device.is_cuda());
    for (std::int64_t s = 0; s < steps_this_epoch && step < total_steps; ++s) {
      const auto step_start = Clock::now();
      StepVotes mine;
      mine.stop = StopRequestHandler::requested() != 0;
      mine.save_due = leader && checkpoints.save_due_by_time();
      mine.writer_failed = leader && checkpoints.write_failed();
      mine.save_requested = SaveRequest::pending();
      agreement.begin(mine);
      double step_loss = 0.0;
      for (std::int64_t micro = 0; micro < accum; ++micro) {
        auto batch = loader.next();
        if (!batch) throw Error("internal error: the loader ran out of batches before the epoch's last step");
        const bool sync = micro == accum - 1;
        if (micro == 0 && config.ddp.broadcast_buffers && !buffers.empty()) comm.broadcast_coalesced(buffers, 0);
        reducer.begin_backward(sync);
        at::Tensor inputs = batch->inputs.to(device, /*non_blocking=*/true);
        at::Tensor targets = batch->targets.to(device, /*non_blocking=*/true);
        at::Tensor logits;
        {
          AutocastScope autocast(precision, device);  // train.precision: the forward in bf16/fp16, the loss in fp32
          logits = model->forward(inputs);
        }
        at::Tensor loss = model->loss(logits.to(at::kFloat), targets);
        // Dividing the loss by accum x world makes the summed, all-reduced gradient the mean over every sample of
        // the step, without a separate pass over the gradients (exact for power-of-two worlds).
        (loss * (gradient_scale * scaler.scale())).backward();
        step_loss += loss.item<double>() / static_cast<double>(accum);
      }
      reducer.finish_backward();
      // fp16: unscale before clipping; a step with inf/nan gradients is skipped, alike on every rank (grad_scaler.hpp).
      const bool found_inf = scaler.unscale_and_check(parameters);
      if (train.clip_grad_norm > 0 && !found_inf) torch::nn::utils::clip_grad_norm_(parameters, train.clip_grad_norm);
      set_learning_rate(*optimizer, schedule.at(step));
      if (scaler.update(found_inf)) optimizer->step();
      reducer.zero_grad();
      ++step;
      consumed += samples_per_step;
      heartbeat.beat(step, step_loss);
      const StepVotes votes = agreement.finish();
      const bool epoch_done = s + 1 == steps_this_epoch;
      const TrainPosition position{step, epoch_done ? epoch + 1 : epoch, epoch_done ? 0 : consumed};
      current = position;
      if (votes.writer_failed) {
        const std::string error = leader ? checkpoints.take_write_error() : std::string();
        if (config.checkpoint.on_write_error == OnWriteError::Stop) {
          if (leader) throw Error(fmt::format("{} (checkpoint.on_write_error: stop)", error));
          fail_after_rank0(comm, Error("rank 0 could not write a checkpoint; stopping with it (checkpoint.on_write_error: stop)"));
        }
        if (leader) std::fprintf(stderr, "mgtrain: warning: training goes on without that checkpoint (checkpoint.on_write_error: continue)\n");
      }
      if (votes.stop) {
        StopRequestHandler::stop_agreed();  // late copies of the signal (SLURM, the launcher) must not kill us now
        save(position, "stop requested");
        checkpoints.wait_for_writes();
        if (leader && checkpoints.write_failed()) throw Error(checkpoints.take_write_error());
        summary.stop_signal = StopRequestHandler::requested() ? StopRequestHandler::requested() : SIGTERM;
        break;
      }
      if ((config.checkpoint.every_steps > 0 && step % config.checkpoint.every_steps == 0) || votes.save_due) {
        save(position, votes.save_due ? "every_minutes" : "every_steps");
      }
      if (votes.save_requested) {  // SIGUSR2 on some rank: save now and go on
        SaveRequest::clear();      // every rank: one save for the signals that arrived up to this step
        if (!checkpoints.enabled()) {
          if (leader) std::fprintf(stderr, "mgtrain: warning: SIGUSR2 asked for a checkpoint at step %lld, but checkpoints are off "
                                           "(checkpoint.dir is empty); training goes on\n", static_cast<long long>(step));
        } else if (last_saved_step != step) {
          save(position, "requested");
        }
      }

      const double elapsed = seconds_since(step_start);
      if (step > timing_warmup) {
        timed_seconds += elapsed;
        ++timed_steps;
        step_times.push_back(elapsed);
      }
      window_loss += step_loss;
      ++window_count;
      if (leader && (step % config.log.every_steps == 0 || step == total_steps)) {
        summary.final_train_loss = window_loss / static_cast<double>(window_count);
        window_loss = 0.0;
        window_count = 0;
      }
      if (leader) {
        StepReport report;
        report.step = step;
        report.epoch = epoch + 1;
        report.loss = step_loss;
        report.lr = schedule.at(step - 1);
        report.step_time_s = elapsed;
        report.samples_per_s = timed_steps > 0 ? static_cast<double>(timed_steps * samples_per_step) / timed_seconds
                                               : static_cast<double>((step - first_step) * samples_per_step) / seconds_since(loop_start);
        if (scaler.enabled()) report.loss_scale = scaler.scale();  // fp16: metrics row and train/loss_scale
        reporter.on_step(report);
      }
      if (train.eval_every_steps > 0 && step % train.eval_every_steps == 0) run_eval("periodic");
      if (epoch_done) {
        summary.epochs_completed = epoch + 1;
        if (train.eval_at_epoch_end) run_eval("epoch end");
        const std::int64_t every = config.checkpoint.every_epochs;
        if (every > 0 && (epoch + 1) % every == 0 && last_saved_step != step) save(position, "epoch end");
      }
    }
    if (summary.stop_signal) break;
    if (steps_this_epoch == 0) summary.epochs_completed = epoch + 1;  // resumed right at its end
  }
  if (!summary.stop_signal && step == total_steps && total_steps > first_step) {
    if (train.eval_at_epoch_end && evaluated_at_step != step) run_eval("end");
    if (config.checkpoint.at_end && last_saved_step != step) save(current, "end");
  }
  reporter.finish();
  checkpoints.wait_for_writes();
  if (leader && checkpoints.write_failed()) {
    const std::string error = checkpoints.take_write_error();
    if (config.checkpoint.on_write_error == OnWriteError::Stop) throw Error(error);
    std::fprintf(stderr, "mgtrain: warning: the last checkpoint was not written (checkpoint.on_write_error: continue); "
                         "the newest one on disk is older\n");
  }
  if (window_count > 0) summary.final_train_loss = window_loss / static_cast<double>(window_count);
  comm.barrier();  // rank 0 hosts the store: nobody leaves before everyone is done

  summary.steps = step;
  summary.wall_s = seconds_since(run_start);
  summary.samples_per_s = timed_seconds > 0 ? static_cast<double>(timed_steps * samples_per_step) / timed_seconds : 0.0;
  summary.step_time_ms = median(step_times) * 1000.0;
  summary.precision = std::string(name_of(precision.mode));
  summary.loss_scaling = scaler.enabled();
  summary.loss_scale = scaler.scale();
  summary.skipped_steps = scaler.skipped_steps();
  return summary;
}

std::string summary_json_line(const TrainSummary& s) {
  JsonWriter json(0);
  json.begin_object().key("summary").begin_object();
  json.key("steps").value(static_cast<long long>(s.steps));
  json.key("epochs").value(static_cast<long long>(s.epochs_completed));
  json.key("wall_s").value(s.wall_s);
  json.key("samples_per_s").value(s.samples_per_s);
  json.key("step_time_ms").value(s.step_time_ms);
  json.key("world_size").value(s.world_size);
  json.key("final_train_loss").value(s.final_train_loss);
  json.key("model").value(s.model);
  json.key("device").value(s.device);
  json.key("backend").value(s.backend);
  json.key("precision").value(s.precision);
  if (s.loss_scaling) {
    json.key("loss_scale").value(s.loss_scale);
    json.key("skipped_steps").value(static_cast<long long>(s.skipped_steps));
  }
  if (s.has_eval) {
    json.key("eval").begin_object();
    json.key("loss").value(s.eval.loss);
    json.key("accuracy").value(s.eval.accuracy);
    if (s.eval.perplexity > 0) json.key("perplexity").value(s.eval.perplexity);
    json.key("samples").value(static_cast<long long>(s.eval.samples));
    json.end_object();
  }
  json.end_object().end_object();
  return json.text();
}

}  // namespace mgtrain
