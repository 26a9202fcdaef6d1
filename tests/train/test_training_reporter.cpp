// TrainingReporter with fixed numbers: where the progress goes (log.progress, the launcher's word on its console,
// a terminal), metrics.jsonl rows whose loss and step time are means since the previous row, eval rows, the
// same numbers in the TensorBoard file, the restart count, and nothing at all from ranks other than 0.
#include "catch_with_torch.hpp"

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "support/temp_dir.hpp"
#include "support/tfevents_reader.hpp"
#include "train/loop/trainer.hpp"
#include "train/loop/training_reporter.hpp"
#include "util/value_parsing.hpp"

using namespace mgtrain;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The value of "key": in a flat JSON row, as text.
// The value of `key` in a metrics row as text: numbers in their shortest form (5.0 -> "5"), strings quoted.
std::string field(const std::string& row, const std::string& key) {
  const nlohmann::json object = nlohmann::json::parse(row);
  auto it = object.find(key);
  if (it == object.end()) return "<none>";
  if (it->is_number_integer()) return std::to_string(it->get<long long>());
  if (it->is_number()) {
    const double value = it->get<double>();
    return value == static_cast<double>(static_cast<long long>(value)) ? std::to_string(static_cast<long long>(value))
                                                                       : mgtrain::format_number(value);
  }
  return it->dump();
}

}  // namespace

TEST_CASE("the progress goes where log.progress, the launcher and the terminal say", "[reporter]") {
  const EnvMap launcher_terminal{{"MGTRAIN_CONSOLE_IS_TTY", "1"}, {"MGTRAIN_RUN_DIR", "/r"}};
  const EnvMap launcher_pipe{{"MGTRAIN_CONSOLE_IS_TTY", "0"}, {"MGTRAIN_RUN_DIR", "/r"}};
  const EnvMap launcher_log_only{{"MGTRAIN_RUN_DIR", "/r"}};
  const EnvMap alone{};
  CHECK(choose_progress_surface(ProgressMode::Off, launcher_terminal, true) == ProgressSurface::Off);
  CHECK(choose_progress_surface(ProgressMode::Lines, launcher_terminal, true) == ProgressSurface::Lines);
  CHECK(choose_progress_surface(ProgressMode::Auto, launcher_terminal, false) == ProgressSurface::BarThroughLauncher);
  CHECK(choose_progress_surface(ProgressMode::Auto, launcher_pipe, true) ==
        ProgressSurface::Lines);  // the launcher's word counts
  CHECK(choose_progress_surface(ProgressMode::Bar, launcher_pipe, false) == ProgressSurface::BarThroughLauncher);
  CHECK(choose_progress_surface(ProgressMode::Auto, launcher_log_only, true) == ProgressSurface::Lines);
  CHECK(choose_progress_surface(ProgressMode::Bar, launcher_log_only, true) ==
        ProgressSurface::Lines);  // nobody would see a bar
  CHECK(choose_progress_surface(ProgressMode::Auto, alone, true) == ProgressSurface::BarOnTerminal);
  CHECK(choose_progress_surface(ProgressMode::Auto, alone, false) == ProgressSurface::Lines);
  CHECK(choose_progress_surface(ProgressMode::Bar, alone, false) == ProgressSurface::BarOnTerminal);
}

TEST_CASE("metrics rows hold means since the previous row, and TensorBoard the same numbers", "[reporter]") {
  const testing::TempDir dir("mgtrain-reporter");
  Config config;
  config.log.progress = ProgressMode::Off;
  config.log.metrics_every_steps = 2;
  config.log.tensorboard = true;
  const EnvMap env{{"MGTRAIN_RUN_DIR", dir.path()}, {"TORCHELASTIC_RESTART_COUNT", "3"}};
  {
    TrainingReporter reporter(config, /*rank=*/0, /*total_steps=*/5, /*samples_per_step=*/64, /*is_cuda=*/false, env);
    for (int step = 1; step <= 5; ++step) {
      StepReport report;
      report.step = step;
      report.epoch = step <= 3 ? 1 : 2;
      report.loss = step;  // rows: (1+2)/2, (3+4)/2, 5 (the last step)
      report.lr = 0.1;
      report.step_time_s = 0.001 * step;  // 1.5 ms, 3.5 ms, 5 ms
      report.samples_per_s = 1000;
      reporter.on_step(report);
    }
    EvalResult eval;
    eval.loss = 0.5;
    eval.accuracy = 0.75;
    eval.samples = 100;
    reporter.on_eval(5, eval, /*language_model=*/false, "end");
  }
  const std::vector<std::string> rows = [&] {
    std::vector<std::string> lines;
    std::istringstream in(read_file(dir / "metrics.jsonl"));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }();
  REQUIRE(rows.size() == 4);
  CHECK(field(rows[0], "step") == "2");
  CHECK(field(rows[0], "loss") == "1.5");
  CHECK(std::stod(field(rows[0], "step_time_ms")) == Approx(1.5));
  CHECK(field(rows[0], "attempt") == "3");
  CHECK(field(rows[1], "step") == "4");
  CHECK(field(rows[1], "epoch") == "2");
  CHECK(field(rows[1], "loss") == "3.5");
  CHECK(std::stod(field(rows[1], "step_time_ms")) == Approx(3.5));
  CHECK(field(rows[2], "step") == "5");
  CHECK(field(rows[2], "loss") == "5");
  CHECK(field(rows[2], "samples_per_s") == "1000");
  CHECK(std::stoll(field(rows[2], "rss_bytes")) > 0);
  CHECK(field(rows[2], "loss_scale") == "<none>");
  CHECK(field(rows[3], "kind") == "\"eval\"");
  CHECK(field(rows[3], "step") == "5");
  CHECK(field(rows[3], "epoch") == "2");
  CHECK(field(rows[3], "eval.accuracy") == "0.75");
  CHECK(field(rows[3], "eval.perplexity") == "<none>");

  std::vector<fs::path> event_files;
  for (const auto& entry : fs::directory_iterator(dir / "tensorboard")) event_files.push_back(entry.path());
  REQUIRE(event_files.size() == 1);
  const std::vector<std::string> records = testing::read_records(read_file(event_files[0]));
  REQUIRE(records.size() == 5);
  const std::vector<float> losses{1.5f, 3.5f, 5.0f};
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const testing::DecodedEvent event = testing::decode_event(records[i + 1]);
    CHECK(event.step == static_cast<std::int64_t>(2 * i + 2 - (i == 2 ? 1 : 0)));
    CHECK(event.scalars.at(0).tag == "train/loss");
    CHECK(event.scalars.at(0).value == losses[i]);
  }
  const testing::DecodedEvent eval_event = testing::decode_event(records[4]);
  CHECK(eval_event.scalars.at(1).tag == "eval/accuracy");
  CHECK(eval_event.scalars.at(1).value == 0.75f);
}

TEST_CASE("ranks other than 0 write no metrics files", "[reporter]") {
  const testing::TempDir dir("mgtrain-reporter");
  Config config;
  config.log.progress = ProgressMode::Lines;
  {
    TrainingReporter reporter(config, /*rank=*/1, 10, 64, false, {{"MGTRAIN_RUN_DIR", dir.path()}});
    StepReport report;
    report.step = 10;
    report.loss = 1;
    reporter.on_step(report);
  }
  CHECK(fs::is_empty(dir.path()));
}
