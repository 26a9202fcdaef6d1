// Rank 0's progress display, eval lines, metrics.jsonl rows and TensorBoard scalars (see training_reporter.hpp).
#include "train/loop/training_reporter.hpp"

#include <sys/ioctl.h>
#include <sys/time.h>
#include <unistd.h>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "contract/console_progress.hpp"
#include "contract/log_layout.hpp"
#include "contract/worker_variables.hpp"
#include "train/loop/trainer.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "worker_io/metrics_writer.hpp"
#include "worker_io/progress_display.hpp"
#include "worker_io/tfevents_writer.hpp"

#ifdef MGTRAIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBarRedrawInterval = std::chrono::milliseconds(200);
constexpr int kLauncherPrefixColumns = 9;  // "[rank 0] "

double unix_time() {
  timeval now{};
  gettimeofday(&now, nullptr);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_usec) * 1e-6;
}

std::string env_value(const EnvMap& env, const char* name) {
  auto found = env.find(name);
  return found == env.end() ? std::string() : found->second;
}

void print_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace

ProgressSurface choose_progress_surface(ProgressMode setting, const EnvMap& env, bool stdout_is_terminal) {
  if (setting == ProgressMode::Off) return ProgressSurface::Off;
  if (setting == ProgressMode::Lines) return ProgressSurface::Lines;
  const auto launcher_console = env.find(kConsoleIsTtyVariable);
  if (launcher_console != env.end()) {  // started by mgtrain launch, stdout shown on its console
    const bool terminal = launcher_console->second == "1";
    return terminal || setting == ProgressMode::Bar ? ProgressSurface::BarThroughLauncher : ProgressSurface::Lines;
  }
  if (env.count(kRunDirVariable)) return ProgressSurface::Lines;  // launched, but our stdout goes only to a log file
  return stdout_is_terminal || setting == ProgressMode::Bar ? ProgressSurface::BarOnTerminal : ProgressSurface::Lines;
}

TrainingReporter::TrainingReporter(const Config& config, int rank, std::int64_t total_steps,
                                   std::int64_t samples_per_step, bool is_cuda, const EnvMap& env)
    : leader_(rank == 0),
      log_(config.log),
      total_steps_(total_steps),
      samples_per_step_(samples_per_step),
      is_cuda_(is_cuda),
      start_(Clock::now()) {
  if (!leader_) return;
  const std::string attempt = env_value(env, "TORCHELASTIC_RESTART_COUNT");
  attempt_ = attempt.empty() ? 0 : std::atoi(attempt.c_str());
  surface_ = choose_progress_surface(log_.progress, env, isatty(STDOUT_FILENO) != 0);
  const int columns = std::atoi(env_value(env, kConsoleColumnsVariable).c_str());
  if (surface_ == ProgressSurface::BarThroughLauncher)
    bar_columns_ = (columns > 0 ? columns : 100) - kLauncherPrefixColumns - 1;
  if (surface_ == ProgressSurface::BarOnTerminal) {
    winsize size{};
    const int env_columns = std::atoi(env_value(env, "COLUMNS").c_str());
    const int terminal = ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
    bar_columns_ = (terminal > 0 ? terminal : env_columns > 0 ? env_columns : 80) - 1;
  }

  const bool wants_files = log_.metrics_every_steps > 0 || log_.tensorboard;
  const std::string run_dir = env_value(env, kRunDirVariable);
  if (wants_files && run_dir.empty()) {
    log::progress("note: not started by `mgtrain launch` (no {}): no metrics.jsonl or TensorBoard files for this run",
                  kRunDirVariable);
    return;
  }
  // Monitoring must not stop training: a file that cannot be created is a warning, and the run goes on.
  try {
    if (log_.metrics_every_steps > 0) metrics_ = std::make_unique<MetricsWriter>(log_layout::metrics_jsonl(run_dir));
    if (log_.tensorboard) tensorboard_ = std::make_unique<TfEventsWriter>(run_dir + "/tensorboard");
  } catch (const Error& e) {
    log::warn("{}; training goes on without it", e.what());
  }
}

TrainingReporter::~TrainingReporter() { finish(); }

void TrainingReporter::on_step(const StepReport& r) {
  if (!leader_ || finished_) return;
  last_epoch_ = r.epoch;
  line_window_.add(r.loss, r.step_time_s);
  metrics_window_.add(r.loss, r.step_time_s);
  bar_window_.add(r.loss, r.step_time_s);
  const bool last = r.step == total_steps_;

  const std::int64_t row_every = log_.metrics_every_steps > 0 ? log_.metrics_every_steps : log_.every_steps;
  if ((metrics_ || tensorboard_) && (r.step % row_every == 0 || last)) {
    const double loss = metrics_window_.mean_loss();
    write_train_row(r, loss, metrics_window_.step_time_s * 1000.0 / static_cast<double>(metrics_window_.steps));
    metrics_window_ = {};
  }

  if (r.step % log_.every_steps == 0 || last) {
    ProgressSnapshot line{r.step, total_steps_, r.epoch, line_window_.mean_loss(), r.lr, r.samples_per_s, 0.0, 0.0};
    line.eta_s =
        r.samples_per_s > 0 ? static_cast<double>((total_steps_ - r.step) * samples_per_step_) / r.samples_per_s : 0.0;
    line_window_ = {};
    if (surface_ == ProgressSurface::Lines) print_line(format_progress_line(line));
    // Behind the launcher the bar replaces these lines on the console; the rank's log file still gets them.
    if (surface_ == ProgressSurface::BarThroughLauncher)
      print_line(std::string(kLogOnlyMarker) + format_progress_line(line));
  }
  if (surface_ == ProgressSurface::BarThroughLauncher || surface_ == ProgressSurface::BarOnTerminal) {
    const auto now = Clock::now();
    if (last || !bar_drawn_ || now - last_redraw_ >= kBarRedrawInterval) {
      draw_bar(r, bar_window_.mean_loss());
      bar_window_ = {};
      last_redraw_ = now;
    }
  }
}

void TrainingReporter::draw_bar(const StepReport& r, double loss) {
  ProgressSnapshot p{r.step, total_steps_, r.epoch, loss, r.lr, r.samples_per_s, 0.0, 0.0};
  p.eta_s =
      r.samples_per_s > 0 ? static_cast<double>((total_steps_ - r.step) * samples_per_step_) / r.samples_per_s : 0.0;
  p.elapsed_s = std::chrono::duration<double>(Clock::now() - start_).count();
  const std::string bar = format_progress_bar(p, bar_columns_);
  if (surface_ == ProgressSurface::BarThroughLauncher) {
    print_line(std::string(kBarMarker) + bar);
  } else {
    // Straight on a terminal: draw, clear the rest, and leave the cursor at the line's start, so a line
    // printed by someone else (a checkpoint message from the writer thread) overwrites the bar instead of
    // continuing after it.
    std::fputs(("\r" + bar + "\x1b[K\r").c_str(), stdout);
    std::fflush(stdout);
  }
  bar_drawn_ = true;
  last_bar_ = bar;
}

void TrainingReporter::write_train_row(const StepReport& r, double loss, double step_time_ms) {
  const double now = unix_time();
  if (metrics_) {
    TrainMetricsRow row;
    row.step = r.step;
    row.epoch = r.epoch;
    row.time = now;
    row.loss = loss;
    row.lr = r.lr;
    row.samples_per_s = r.samples_per_s;
    row.step_time_ms = step_time_ms;
    row.rss_bytes = resident_set_bytes();
    row.attempt = attempt_;
    row.loss_scale = r.loss_scale;
#ifdef MGTRAIN_WITH_CUDA
    if (is_cuda_) {
      // Index 0 is StatType::AGGREGATE (all pools); the enum moved namespaces in LibTorch 2.x, the index did not.
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
      row.cuda_allocated_bytes = stats.allocated_bytes[0].current;
    }
#endif
    metrics_->append(train_metrics_json(row));
  }
  if (tensorboard_) {
    std::vector<TfScalar> scalars{{"train/loss", static_cast<float>(loss)},
                                  {"train/lr", static_cast<float>(r.lr)},
                                  {"train/samples_per_s", static_cast<float>(r.samples_per_s)}};
    if (r.loss_scale) scalars.push_back({"train/loss_scale", static_cast<float>(*r.loss_scale)});
    tensorboard_->add_scalars(r.step, scalars, now);
  }
}

void TrainingReporter::on_eval(std::int64_t step, const EvalResult& eval, bool language_model, const char* when) {
  if (!leader_) return;
  before_message();
  print_line(fmt::format("mgtrain: eval ({}, step {}): loss {:.4f} accuracy {:.4f}{} on {} samples", when, step,
                         eval.loss, eval.accuracy,
                         language_model ? fmt::format(" perplexity {:.2f}", eval.perplexity) : "", eval.samples));
  const double now = unix_time();
  if (metrics_) {
    EvalMetricsRow row;
    row.step = step;
    row.epoch = last_epoch_;
    row.time = now;
    row.loss = eval.loss;
    row.accuracy = eval.accuracy;
    if (language_model) row.perplexity = eval.perplexity;
    row.attempt = attempt_;
    metrics_->append(eval_metrics_json(row));
  }
  if (tensorboard_) {
    std::vector<TfScalar> scalars{{"eval/loss", static_cast<float>(eval.loss)},
                                  {"eval/accuracy", static_cast<float>(eval.accuracy)}};
    if (language_model) scalars.push_back({"eval/perplexity", static_cast<float>(eval.perplexity)});
    tensorboard_->add_scalars(step, scalars, now);
  }
}

void TrainingReporter::before_message() {
  if (surface_ == ProgressSurface::BarOnTerminal && bar_drawn_) {
    std::fputs("\x1b[K", stdout);  // the cursor is at the bar's start
    std::fflush(stdout);
  }
}

void TrainingReporter::finish() {
  if (!leader_ || finished_) return;
  finished_ = true;
  if (!bar_drawn_) return;
  if (surface_ == ProgressSurface::BarThroughLauncher) print_line(std::string(kBarEndMarker));
  if (surface_ == ProgressSurface::BarOnTerminal) {
    // The last state again (an eval line may have taken its place), then below it.
    std::fputs(("\r" + last_bar_ + "\x1b[K\n").c_str(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace mgtrain
