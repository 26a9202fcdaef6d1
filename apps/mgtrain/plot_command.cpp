// `mgtrain plot RUN [RUN...] [--metric NAME] [-o OUT.png|OUT.svg] [--log-dir DIR]`: finds the runs, reads their
// metrics.jsonl and checks the request here (torch-free, cairo-free), then exec()s the renderer `mgtrain-plot`
// (found next to mgtrain, like the worker) with the curves on its stdin (observe/plot_series.hpp). Cairo lives only
// in mgtrain-plot, so the launcher stays small and fast to start. docs/monitoring.md#plots
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "contract/log_layout.hpp"
#include "contract/worker_binary.hpp"
#include "observe/metrics_reader.hpp"
#include "observe/plot_series.hpp"
#include "observe/run_history.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

std::string default_output(const std::string& metric) {
  std::string name;
  for (char c : metric)
    name += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return name + ".png";
}

// The curve of `metric` in one run, or a UsageError saying what is missing.
PlotSeries series_of(const std::string& run, const std::string& directory, const std::string& metric) {
  const std::string path = log_layout::metrics_jsonl(directory);
  MetricsFileReader reader(path);
  reader.refresh();
  if (!reader.exists()) {
    throw UsageError(
        fmt::format("run '{}' has no metrics file {}: it was not launched by mgtrain with the built-in trainer, "
                    "log.metrics_every_steps was 0, or it stopped before its first row",
                    run, path));
  }
  const MetricsLog& log = reader.log();
  if (log.empty()) {
    throw UsageError(fmt::format("run '{}': {} has no rows yet (empty data){}", run, path,
                                 log.problem_count() ? fmt::format("; {} lines could not be read, first: {}",
                                                                   log.problem_count(), log.problems().front())
                                                     : ""));
  }
  PlotSeries series;
  series.name = run;
  std::size_t non_finite = 0;
  const std::vector<MetricPoint> points = log.series(metric);
  for (const MetricPoint& point : points) {
    if (std::isfinite(point.value)) {
      series.points.emplace_back(static_cast<double>(point.step), point.value);
    } else {
      ++non_finite;
    }
  }
  if (points.empty()) {
    const std::vector<std::string> present = log.metric_names();
    throw UsageError(fmt::format("run '{}' has no metric '{}'{} in {}; metrics present: {} (choose one with --metric)",
                                 run, metric, did_you_mean_suffix(metric, present), path, fmt::join(present, ", ")));
  }
  if (series.points.empty()) {
    throw UsageError(
        fmt::format("run '{}': every value of '{}' in {} is NaN or infinite ({} rows): nothing to draw (empty data)",
                    run, metric, path, non_finite));
  }
  if (non_finite) {
    log::info("run '{}': {} value{} of '{}' that are NaN or infinite are left out of the plot", run, non_finite,
              non_finite == 1 ? "" : "s", metric);
  }
  return series;
}

std::string renderer_path() {
  std::string path = executable_directory() + "/mgtrain-plot";
  if (access(path.c_str(), X_OK) != 0) {
#ifdef MGTRAIN_WITH_PLOT
    // This build found cairo, so the renderer is built with mgtrain: it was removed, or mgtrain was copied alone.
    throw UsageError(fmt::format(
        "the plot renderer {} is not there ({}): this build has cairo, so `cmake --build <build dir> --target "
        "mgtrain-plot` (or scripts/build.sh) builds it; an installed mgtrain has it beside itself",
        path, std::strerror(errno)));
#else
    throw UsageError(
        fmt::format("the plot renderer {} is not there ({}): this build found no cairo; install libcairo2-dev "
                    "(apt-get install libcairo2-dev, or scripts/install-deps.sh) and run scripts/build.sh again",
                    path, std::strerror(errno)));
#endif
  }
  return path;
}

// Puts `text` in an anonymous in-memory file and makes it this process's stdin, for the program exec()ed next.
void stdin_from_text(const std::string& text) {
  const Fd fd(memfd_create("mgtrain-plot-data", MFD_CLOEXEC));
  if (!fd) throw SystemError("cannot create the plot data (memfd_create)", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("cannot write the plot data (memfd)", errno);
    done += static_cast<std::size_t>(n);
  }
  if (lseek(fd.get(), 0, SEEK_SET) != 0 || dup2(fd.get(), 0) != 0)
    throw SystemError("cannot hand the plot data to mgtrain-plot", errno);
}

}  // namespace

int run_plot_command(const PlotRequest& request) {
  const std::string log_dir = request.log_dir.empty() ? log_layout::default_log_dir() : request.log_dir;
  const std::string output = request.output.empty() ? default_output(request.metric) : request.output;
  if (!ends_with(output, ".png") && !ends_with(output, ".svg")) {
    throw UsageError(
        fmt::format("plot: cannot tell the image format of '{}': name the output file .png or .svg (-o)", output));
  }
  if (request.metric.empty())
    throw UsageError("plot: --metric is empty; give a column of metrics.jsonl such as loss or eval.accuracy");

  PlotSpec spec;
  std::vector<std::string> names;
  for (const std::string& run : request.runs) {
    const std::string directory = resolve_run_directory(run, log_dir);
    spec.series.push_back(series_of(run, directory, request.metric));
    names.push_back(run);
  }
  spec.title = fmt::format("{}: {}", request.metric, fmt::join(names, ", "));
  if (spec.title.size() > 90) spec.title = fmt::format("{}: {} runs", request.metric, names.size());
  spec.x_label = "step";
  spec.y_label = request.metric;

  const std::string renderer = renderer_path();
  stdin_from_text(plot_spec_to_text(spec));
  std::vector<std::string> args = {renderer, "--output", output};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(renderer.c_str(), argv.data());
  throw SystemError(fmt::format("cannot run {}", renderer), errno);
}

}  // namespace mgtrain
