// What rank 0 tells about training as it goes, in one place: the progress display (plain "mgtrain: step"
// lines, or a live bar on a terminal, log.progress), the eval lines, <run dir>/metrics.jsonl
// (log.metrics_every_steps) and TensorBoard event files (log.tensorboard). The trainer hands it the numbers
// it already computes, once per step and per evaluation; on other ranks it does nothing.
// docs/monitoring.md describes the output.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "util/environment.hpp"

namespace mgtrain {

class MetricsWriter;
class TfEventsWriter;
struct EvalResult;

// One optimizer step as the trainer saw it.
struct StepReport {
  std::int64_t step = 0;   // steps done, this one included
  std::int64_t epoch = 1;  // 1-based
  double loss = 0;         // this step's loss (mean over its micro-batches)
  double lr = 0;
  double step_time_s = 0;
  double samples_per_s = 0;          // all ranks together
  std::optional<double> loss_scale;  // fp16 loss scaling
};

// Where rank 0's progress goes; decided from log.progress, the launcher's word on its console
// (MGTRAIN_CONSOLE_IS_TTY) or, without the launcher, whether stdout is a terminal.
enum class ProgressSurface { Off, Lines, BarThroughLauncher, BarOnTerminal };
ProgressSurface choose_progress_surface(ProgressMode setting, const EnvMap& env, bool stdout_is_terminal);

class TrainingReporter {
 public:
  // `is_cuda`: the training device is a GPU (memory rows get cuda_allocated_bytes in CUDA builds).
  TrainingReporter(const Config& config, int rank, std::int64_t total_steps, std::int64_t samples_per_step,
                   bool is_cuda, const EnvMap& env);
  ~TrainingReporter();
  TrainingReporter(const TrainingReporter&) = delete;
  TrainingReporter& operator=(const TrainingReporter&) = delete;

  void on_step(const StepReport& report);
  // Prints the eval line ("mgtrain: eval (<when>, step N): ...") and records the eval row and scalars.
  void on_eval(std::int64_t step, const EvalResult& eval, bool language_model, const char* when);
  // Call before the trainer prints a line of its own: a bar drawn straight on a terminal is cleared first.
  void before_message();
  // Training is over (or stopped): the bar's last state stays on screen as a line. Idempotent.
  void finish();

 private:
  struct Window {  // sums since the last row / line / redraw
    double loss = 0, step_time_s = 0;
    std::int64_t steps = 0;
    void add(double l, double t) {
      loss += l;
      step_time_s += t;
      ++steps;
    }
    double mean_loss() const { return steps ? loss / static_cast<double>(steps) : 0.0; }
  };
  void write_train_row(const StepReport& report, double loss, double step_time_ms);
  void draw_bar(const StepReport& report, double loss);

  bool leader_;
  const LogConfig log_;
  std::int64_t total_steps_;
  std::int64_t samples_per_step_;
  bool is_cuda_;
  int attempt_ = 0;
  ProgressSurface surface_ = ProgressSurface::Off;
  int bar_columns_ = 100;
  bool bar_drawn_ = false;
  std::string last_bar_;  // the bar as last drawn (on a terminal, drawn again as the final line)
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_redraw_{};
  std::int64_t last_epoch_ = 1;
  Window line_window_, metrics_window_, bar_window_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<TfEventsWriter> tensorboard_;
};

}  // namespace mgtrain
