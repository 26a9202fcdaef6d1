// Run history and plots through the real binaries: launches of script workers that write metrics.jsonl rows end
// succeeded, failed, stopped or (launcher SIGKILLed) interrupted in `mgtrain runs`; a relaunch keeps the earlier
// run.json; `mgtrain plot` writes a PNG (signature, IHDR size, pixels decoded with cairo) and an SVG (root element,
// size, paths), and refuses an unknown run, an absent metric and empty data with the names that do exist.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#ifdef MGTRAIN_TEST_WITH_CAIRO
#include <cairo.h>
#endif

#include "launch_fixture.hpp"
#include "process/run_capture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using Catch::Contains;

namespace {

const bool kPlotBuilt = file_exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-plot");

CapturedRun run_mgtrain(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), kMgtrain);
  args.insert(args.end(), {"--log-dir", dir / "runs"});
  CaptureOptions options;
  options.timeout_s = 60;
  return run_and_capture(args, options);
}

CapturedRun launch(const TempDir& dir, const std::string& run_id, const std::string& script) {
  return run_and_capture(
      {kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", run_id, "--nproc", "1", "--", "sh", "-c", script},
      CaptureOptions{60.0, {}, {}, ""});
}

// A worker script that appends metrics rows as rank 0 of the trainer does: train rows every step, eval rows
// every 5 steps (eval.loss falling, eval.accuracy rising), then exits with `code` (negative: goes on to what follows).
std::string metrics_script(const TempDir& dir, const std::string& run_id, int steps, double scale, int code) {
  const std::string file = dir / ("runs/" + run_id + "/metrics.jsonl");
  return "i=1; while [ $i -le " + std::to_string(steps) +
         " ]; do "
         "printf "
         "'{\"kind\":\"train\",\"step\":%d,\"epoch\":0,\"time\":%d.5,\"loss\":%s,\"lr\":0.01,\"samples_per_s\":5000,"
         "\"attempt\":0}\\n' "
         "$i $((1763800000 + i)) $(awk \"BEGIN{print " +
         std::to_string(scale) + "/$i}\") >> " + file +
         "; "
         "if [ $((i % 5)) = 0 ]; then printf "
         "'{\"kind\":\"eval\",\"step\":%d,\"time\":%d,\"eval.loss\":%s,\"eval.accuracy\":%s,\"attempt\":0}\\n' "
         "$i $((1763800000 + i)) $(awk \"BEGIN{print 1/$i}\") $(awk \"BEGIN{print 1-1/$i}\") >> " +
         file +
         "; fi; "
         "i=$((i + 1)); done" +
         (code >= 0 ? "; exit " + std::to_string(code) : std::string());
}

std::map<std::string, YAML::Node> runs_by_id(const CapturedRun& run) {
  std::map<std::string, YAML::Node> by_id;
  const YAML::Node list = YAML::Load(run.out);
  REQUIRE(list.IsSequence());
  for (std::size_t i = 0; i < list.size(); ++i) by_id[list[i]["run_id"].as<std::string>()] = list[i];
  return by_id;
}

std::uint32_t big_endian_32(const std::string& bytes, std::size_t at) {
  return (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at])) << 24) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
}

}  // namespace

TEST_CASE("mgtrain runs lists succeeded, failed, stopped and interrupted runs newest first", "[binary][runs]") {
  TempDir dir;
  CapturedRun ok = launch(dir, "ok", metrics_script(dir, "ok", 20, 2.0, 0));
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  CapturedRun bad = launch(dir, "bad", metrics_script(dir, "bad", 7, 3.0, 3));
  REQUIRE(bad.exit_code == 3);

  // Stopped: SIGTERM to the launcher while the worker sleeps.
  ChildProcess stopped = start_process({kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", "stopped",
                                        "--grace-period", "2", "--", "sh", "-c", "exec sleep 60"},
                                       dir / "stopped");
  REQUIRE(wait_until([&] { return file_exists(dir / "runs/stopped/attempt_0/rank_0/stdout.log"); },
                     std::chrono::seconds(20)));
  CHECK(runs_by_id(run_mgtrain(dir, {"runs", "--json"}))["stopped"]["status"].as<std::string>() == "running");
  kill(stopped.pid, SIGTERM);
  CHECK(wait_for_exit(stopped.pid, std::chrono::seconds(20)) == 143);

  // Interrupted: the launcher is SIGKILLed, so run.json still says "running", but no launcher holds it.
  ChildProcess killed = start_process({kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", "killed", "--", "sh",
                                       "-c", metrics_script(dir, "killed", 3, 1.0, -1) + "; exec sleep 60"},
                                      dir / "killed");
  REQUIRE(
      wait_until([&] { return read_text(dir / "runs/killed/metrics.jsonl").find("\"step\":3,") != std::string::npos; },
                 std::chrono::seconds(20)));
  kill(killed.pid, SIGKILL);
  CHECK(wait_for_exit(killed.pid, std::chrono::seconds(20)) == 128 + SIGKILL);
  CHECK_THAT(read_text(dir / "runs/killed/run.json"), Contains("\"status\": \"running\""));

  CapturedRun json = run_mgtrain(dir, {"runs", "--json"});
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  auto runs = runs_by_id(json);
  REQUIRE(runs.size() == 4);
  CHECK(runs["ok"]["status"].as<std::string>() == "succeeded");
  CHECK(runs["ok"]["exit_code"].as<int>() == 0);
  CHECK(runs["ok"]["steps"].as<int>() == 20);
  CHECK(runs["ok"]["best"]["metric"].as<std::string>() == "eval.accuracy");
  CHECK(runs["ok"]["best"]["value"].as<double>() == Approx(0.95));
  CHECK(runs["ok"]["best"]["step"].as<int>() == 20);
  CHECK(runs["ok"]["duration_s"].as<double>() >= 0);
  CHECK(runs["bad"]["status"].as<std::string>() == "failed");
  CHECK(runs["bad"]["exit_code"].as<int>() == 3);
  CHECK(runs["bad"]["steps"].as<int>() == 7);
  CHECK(runs["stopped"]["status"].as<std::string>() == "stopped");
  CHECK(runs["stopped"]["exit_code"].as<int>() == 143);
  CHECK(runs["stopped"]["steps"].IsNull());
  CHECK(runs["killed"]["status"].as<std::string>() == "interrupted");
  CHECK(runs["killed"]["exit_code"].IsNull());
  CHECK(runs["killed"]["steps"].as<int>() == 3);

  // The table: newest first, one row per run.
  CapturedRun table = run_mgtrain(dir, {"runs"});
  REQUIRE(table.exit_code == 0);
  const auto lines = split_lines(table.out);
  REQUIRE(lines.size() >= 5);
  CHECK_THAT(lines[0], Contains("RUN ID") && Contains("STATUS") && Contains("STARTED") && Contains("DURATION") &&
                           Contains("STEPS") && Contains("BEST"));
  CHECK(lines[1].rfind("killed ", 0) == 0);
  CHECK_THAT(lines[1], Contains("interrupted"));
  CHECK(lines[2].rfind("stopped ", 0) == 0);
  CHECK(lines[3].rfind("bad ", 0) == 0);
  CHECK_THAT(lines[3], Contains("failed (3)"));
  CHECK(lines[4].rfind("ok ", 0) == 0);
  CHECK_THAT(lines[4], Contains("succeeded") && Contains("eval.accuracy 0.95 @20"));

  // A relaunch of "bad" that succeeds: one row with the latest status, the earlier record kept.
  CapturedRun again = launch(dir, "bad", "exit 0");
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(read_text(dir / "runs/bad/earlier/1/run.json"), Contains("\"status\": \"failed\""));
  runs = runs_by_id(run_mgtrain(dir, {"runs", "--json"}));
  CHECK(runs.size() == 4);
  CHECK(runs["bad"]["status"].as<std::string>() == "succeeded");

  CapturedRun missing = run_and_capture({kMgtrain, "runs", "--log-dir", dir / "nowhere"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Contains("no log directory") && Contains("nowhere"));
}

TEST_CASE("mgtrain plot draws PNG and SVG curves and names what is missing", "[binary][plot]") {
  TempDir dir;
  REQUIRE(launch(dir, "a", metrics_script(dir, "a", 40, 2.0, 0)).exit_code == 0);
  REQUIRE(launch(dir, "b", metrics_script(dir, "b", 30, 3.0, 0)).exit_code == 0);
  REQUIRE(launch(dir, "empty", "touch " + dir / "runs/empty/metrics.jsonl").exit_code == 0);

  // Errors come from mgtrain itself, before any renderer runs.
  CapturedRun unknown = run_mgtrain(dir, {"plot", "a", "nope", "-o", dir / "x.png"});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("unknown run 'nope'") && Contains("runs in") && Contains("a, b, empty"));
  CapturedRun absent = run_mgtrain(dir, {"plot", "a", "--metric", "eval.acuracy", "-o", dir / "x.png"});
  CHECK(absent.exit_code == 2);
  CHECK_THAT(absent.err, Contains("no metric 'eval.acuracy'") && Contains("did you mean eval.accuracy?") &&
                             Contains("metrics present: eval.accuracy, eval.loss, loss, lr, samples_per_s"));
  CapturedRun empty = run_mgtrain(dir, {"plot", "empty", "-o", dir / "x.png"});
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.err, Contains("empty data"));
  CapturedRun format = run_mgtrain(dir, {"plot", "a", "-o", dir / "x.jpg"});
  CHECK(format.exit_code == 2);
  CHECK_THAT(format.err, Contains(".png or .svg"));
  CHECK_FALSE(file_exists(dir / "x.png"));

  if (!kPlotBuilt) {
    CapturedRun run = run_mgtrain(dir, {"plot", "a", "-o", dir / "loss.png"});
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("libcairo2-dev"));
    WARN("mgtrain-plot is not built (no cairo): only the refusal was checked");
    return;
  }
  {
    // A build with cairo builds the renderer with mgtrain; an mgtrain copied away from it names the command.
    const std::string alone = dir / "alone";
    std::filesystem::create_directories(alone);
    std::filesystem::copy_file(kMgtrain, alone + "/mgtrain");
    CapturedRun run = run_and_capture({alone + "/mgtrain", "plot", "a", "--log-dir", dir / "runs", "-o", dir / "x.png"},
                                      CaptureOptions{60.0, {}, {}, ""});
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("this build has cairo") && Contains("--target mgtrain-plot"));
  }

  // PNG: two runs by id, the default metric (loss).
  CapturedRun png = run_mgtrain(dir, {"plot", "a", "b", "-o", dir / "loss.png"});
  INFO(png.err);
  REQUIRE(png.exit_code == 0);
  CHECK_THAT(png.out, Contains("wrote " + dir / "loss.png") && Contains("2 series, 70 points"));
  const std::string bytes = read_text(dir / "loss.png");
  REQUIRE(bytes.size() > 33);
  CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(bytes.substr(12, 4) == "IHDR");
  CHECK(big_endian_32(bytes, 16) == 960);
  CHECK(big_endian_32(bytes, 20) == 600);
#ifdef MGTRAIN_TEST_WITH_CAIRO
  {
    cairo_surface_t* image = cairo_image_surface_create_from_png((dir / "loss.png").c_str());
    REQUIRE(cairo_surface_status(image) == CAIRO_STATUS_SUCCESS);
    const int width = cairo_image_surface_get_width(image), height = cairo_image_surface_get_height(image);
    const int stride = cairo_image_surface_get_stride(image);
    const unsigned char* data = cairo_image_surface_get_data(image);
    std::set<std::uint32_t> colours;
    std::size_t blue = 0, orange = 0;
    auto near = [](std::uint32_t pixel, std::uint32_t colour) {  // within 3 per channel (cairo's rounding)
      for (int shift : {0, 8, 16}) {
        const int a = static_cast<int>((pixel >> shift) & 0xFF), b = static_cast<int>((colour >> shift) & 0xFF);
        if (a - b > 3 || b - a > 3) return false;
      }
      return true;
    };
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        const std::uint32_t pixel = *reinterpret_cast<const std::uint32_t*>(data + y * stride + x * 4) & 0xFFFFFF;
        colours.insert(pixel);
        blue += near(pixel, 0x1f77b4);    // series 1 (tab10 blue)
        orange += near(pixel, 0xff7f0e);  // series 2
      }
    }
    cairo_surface_destroy(image);
    CHECK(colours.size() > 10);  // background, grid, text, two curves with anti-aliasing
    CHECK(blue > 200);
    CHECK(orange > 200);
  }
#endif

  // SVG: a run directory path, another metric, the default name in the current directory is not used.
  CapturedRun svg =
      run_mgtrain(dir, {"plot", dir / "runs/a", "b", "--metric", "eval.accuracy", "-o", dir / "accuracy.svg"});
  INFO(svg.err);
  REQUIRE(svg.exit_code == 0);
  const std::string text = read_text(dir / "accuracy.svg");
  CHECK(text.rfind("<?xml", 0) == 0);
  const std::size_t root = text.find("<svg");
  REQUIRE(root != std::string::npos);
  const std::string root_tag = text.substr(root, text.find('>', root) - root);
  CHECK_THAT(root_tag, Contains("width=\"960pt\"") && Contains("height=\"600pt\""));
  std::size_t paths = 0;
  for (std::size_t at = text.find("<path"); at != std::string::npos; at = text.find("<path", at + 1)) ++paths;
  CHECK(paths > 10);
  CHECK(text.size() > 5000);

  // Non-finite values are left out with a note.
  std::ofstream(dir / "runs/a/metrics.jsonl", std::ios::app) << "{\"kind\":\"train\",\"step\":41,\"loss\":NaN}\n";
  CapturedRun nan = run_mgtrain(dir, {"plot", "a", "-o", dir / "nan.svg"});
  CHECK(nan.exit_code == 0);
  CHECK_THAT(nan.err, Contains("1 value of 'loss' that are NaN or infinite are left out"));
}

TEST_CASE("a real training run is listed and plotted from the metrics the trainer wrote", "[binary][runs][plot]") {
  const std::string worker = std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker";
  if (!file_exists(worker)) {
    WARN("mgtrain-worker is not built (no LibTorch): skipping the real training run");
    return;
  }
  TempDir dir;
  CaptureOptions options;
  options.timeout_s = 120;
  options.set_env = {{"OMP_NUM_THREADS", "1"}};
  CapturedRun run = run_and_capture(
      {kMgtrain, "launch", "--nproc", "1", "--run-id", "real", "--log-dir", dir / "runs",
       std::string(MGTRAIN_SOURCE_DIR) + "/configs/bench/mlp-64.yaml", "data.synthetic_samples=512",
       "train.max_steps=12", "log.metrics_every_steps=1", "train.eval_every_steps=6", "log.tensorboard=false"},
      options);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto runs = runs_by_id(run_mgtrain(dir, {"runs", "--json"}));
  REQUIRE(runs.count("real"));
  CHECK(runs["real"]["status"].as<std::string>() == "succeeded");
  CHECK(runs["real"]["steps"].as<int>() == 12);
  CHECK(runs["real"]["world_size"].as<int>() == 1);
  REQUIRE(runs["real"]["best"].IsMap());
  CHECK(runs["real"]["best"]["metric"].as<std::string>() == "eval.accuracy");
  if (!kPlotBuilt) return;
  CapturedRun loss = run_mgtrain(dir, {"plot", "real", "-o", dir / "loss.png"});
  INFO(loss.err);
  CHECK(loss.exit_code == 0);
  CHECK_THAT(loss.out, Contains("1 series, 12 points"));
  CapturedRun lr = run_mgtrain(dir, {"plot", "real", "--metric", "lr", "-o", dir / "lr.svg"});
  CHECK(lr.exit_code == 0);
  CHECK(read_text(dir / "lr.svg").rfind("<?xml", 0) == 0);
}

TEST_CASE("the launcher does not link cairo", "[binary][plot]") {
  CapturedRun ldd = run_and_capture({"ldd", kMgtrain});
  REQUIRE(ldd.exit_code == 0);
  CHECK_THAT(ldd.out, !Contains("libcairo"));
  if (kPlotBuilt) {
    CapturedRun plot = run_and_capture({"ldd", std::string(MGTRAIN_BIN_DIR) + "/mgtrain-plot"});
    CHECK_THAT(plot.out, Contains("libcairo"));
  }
}
