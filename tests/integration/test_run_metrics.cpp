// Rank 0's monitoring output end to end, with the real `mgtrain` launcher and 2 real workers (gloo on CPU,
// configs/bench/mlp-64.yaml on small synthetic data): metrics.jsonl rows and a TensorBoard event file read
// back (CRCs, values, the same losses as the rows), no files when switched off or without the launcher,
// the live bar through the launcher on a pseudo-terminal (and plain lines in the rank's log file), and
// SIGUSR2 = "save a checkpoint now and go on" (to the launcher, to one worker only, without checkpoints).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_jobs/checkpoint_jobs.hpp"
#include "integration/launch_fixture.hpp"
#include "process/run_capture.hpp"
#include "support/tfevents_reader.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kBin = MGTRAIN_BIN_DIR;
const std::string kSource = MGTRAIN_SOURCE_DIR;

std::vector<std::string> job_args(const TempDir& dir, const std::string& run_id,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> args = {kBin + "/mgtrain",
                                   "launch",
                                   "--nproc",
                                   "2",
                                   "--run-id",
                                   run_id,
                                   "--log-dir",
                                   dir.path(),
                                   kSource + "/configs/bench/mlp-64.yaml",
                                   "data.synthetic_samples=4096"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// One flat JSON object's numbers and strings, good enough for metrics rows: "key" -> raw value text.
std::map<std::string, std::string> parse_row(const std::string& line) {
  std::map<std::string, std::string> row;
  static const std::regex field(R"re("([^"]+)":("[^"]*"|[^,}]+))re");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), field); it != std::sregex_iterator(); ++it) {
    std::string value = (*it)[2];
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    row[(*it)[1]] = value;
  }
  return row;
}

std::vector<std::string> tensorboard_files(const std::string& run_dir) {
  std::vector<std::string> files;
  if (!fs::exists(run_dir + "/tensorboard")) return files;
  for (const auto& entry : fs::directory_iterator(run_dir + "/tensorboard")) files.push_back(entry.path().string());
  return files;
}

// Runs argv on a pseudo-terminal `columns` wide and returns everything it wrote there (the exit code in `code`).
std::string run_on_terminal(std::vector<std::string> argv, int columns, int& code) {
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  winsize size{};
  size.ws_col = static_cast<unsigned short>(columns);
  size.ws_row = 40;
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, &size);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("OMP_NUM_THREADS", "1", 1);
    unsetenv("MGTRAIN_RUN_DIR");
    unsetenv("COLUMNS");
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  std::string console;
  std::optional<int> exit_code;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!exit_code && std::chrono::steady_clock::now() < deadline) {
    pollfd readable{master, POLLIN, 0};
    if (poll(&readable, 1, 50) > 0) {
      char buffer[4096];
      const ssize_t got = read(master, buffer, sizeof buffer);
      if (got > 0) console.append(buffer, static_cast<std::size_t>(got));
    }
    exit_code = wait_for_exit(pid, 0ms);
  }
  for (pollfd readable{master, POLLIN, 0}; poll(&readable, 1, 100) > 0;) {  // what it wrote last
    char buffer[4096];
    const ssize_t got = read(master, buffer, sizeof buffer);
    if (got <= 0) break;  // EIO: the terminal's other side is closed
    console.append(buffer, static_cast<std::size_t>(got));
  }
  close(master);
  if (!exit_code) {
    kill(pid, SIGKILL);
    wait_for_exit(pid, 10s);
  }
  code = exit_code.value_or(-1);
  return console;
}

std::string checkpoint_line_regex(const std::string& reason) {
  return "mgtrain: checkpoint \\(" + reason + "\\) step ([0-9]+)";
}

}  // namespace

TEST_CASE("a launched run writes metrics.jsonl and one TensorBoard file, from rank 0 only", "[metrics]") {
  TempDir dir;
  ChildProcess launcher = start_process(
      job_args(dir, "metrics",
               {"train.max_steps=40", "log.every_steps=10", "log.metrics_every_steps=10", "train.eval_every_steps=20"}),
      dir / "launcher", {{"OMP_NUM_THREADS", "1"}});
  REQUIRE(wait_for_exit(launcher.pid, 120s) == 0);
  const std::string out = read_text(launcher.out_path);
  const std::string run_dir = dir / "metrics";
  INFO(out << read_text(launcher.err_path));
  // Not a terminal: the plain lines on the console, no bar markers or carriage returns anywhere.
  CHECK_THAT(out, Contains("[rank 0] mgtrain: step 10/40 epoch 1 loss "));
  CHECK_THAT(out, Contains("[rank 0] mgtrain: step 40/40 epoch 1 loss "));
  CHECK(out.find('\x1e') == std::string::npos);
  CHECK(out.find('\r') == std::string::npos);

  // metrics.jsonl: train rows every 10 steps, eval rows after each eval, all from rank 0.
  const std::vector<std::string> lines = split_lines(read_text(run_dir + "/metrics.jsonl"));
  std::vector<std::map<std::string, std::string>> train, eval;
  for (const std::string& line : lines) {
    REQUIRE(line.front() == '{');
    REQUIRE(line.back() == '}');
    auto row = parse_row(line);
    (row["kind"] == "train" ? train : eval).push_back(row);
  }
  REQUIRE(train.size() == 4);
  REQUIRE(eval.size() == 2);
  for (std::size_t i = 0; i < train.size(); ++i) {
    CHECK(train[i]["step"] == std::to_string(10 * (i + 1)));
    CHECK(train[i]["epoch"] == "1");
    CHECK(train[i]["attempt"] == "0");
    CHECK(std::stod(train[i]["loss"]) > 0);
    CHECK(std::stod(train[i]["lr"]) == Approx(0.01));
    CHECK(std::stod(train[i]["samples_per_s"]) > 0);
    CHECK(std::stod(train[i]["step_time_ms"]) > 0);
    CHECK(std::stoll(train[i]["rss_bytes"]) > 10'000'000);
    CHECK(std::fabs(std::stod(train[i]["time"]) - static_cast<double>(std::time(nullptr))) < 600);
    CHECK(train[i].count("cuda_allocated_bytes") == 0);  // a CPU run
  }
  CHECK(eval[0]["step"] == "20");
  CHECK(eval[1]["step"] == "40");
  CHECK(std::stod(eval[1]["eval.accuracy"]) >= 0);
  CHECK(eval[1].count("eval.loss") == 1);
  CHECK(eval[1].count("eval.perplexity") == 0);  // not a language model

  // TensorBoard: one file (rank 0's), every record's CRCs right, the same numbers as metrics.jsonl.
  const std::vector<std::string> files = tensorboard_files(run_dir);
  REQUIRE(files.size() == 1);
  CHECK_THAT(fs::path(files[0]).filename().string(), Contains("events.out.tfevents."));
  const std::vector<std::string> records = read_records(read_text(files[0]));
  REQUIRE(records.size() == 1 + 4 + 2);
  CHECK(decode_event(records[0]).file_version == "brain.Event:2");
  int train_seen = 0, eval_seen = 0;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const DecodedEvent event = decode_event(records[i]);
    REQUIRE(!event.scalars.empty());
    if (event.scalars[0].tag == "train/loss") {
      const auto& row = train.at(static_cast<std::size_t>(train_seen++));
      CHECK(std::to_string(event.step) == row.at("step"));
      CHECK(event.scalars[0].value == Approx(std::stod(row.at("loss"))).epsilon(1e-6));
      REQUIRE(event.scalars.size() == 3);
      CHECK(event.scalars[1].tag == "train/lr");
      CHECK(event.scalars[2].tag == "train/samples_per_s");
    } else {
      CHECK(event.scalars[0].tag == "eval/loss");
      const auto& row = eval.at(static_cast<std::size_t>(eval_seen++));
      CHECK(std::to_string(event.step) == row.at("step"));
      CHECK(event.scalars[0].value == Approx(std::stod(row.at("eval.loss"))).epsilon(1e-6));
      CHECK(event.scalars.at(1).tag == "eval/accuracy");
    }
  }
  CHECK(train_seen == 4);
  CHECK(eval_seen == 2);

  // The same file through the real protobuf library (TensorBoard is not in Debian; python3-protobuf is).
  const std::string python = "/usr/bin/python3";
  if (access(python.c_str(), X_OK) != 0 || run_and_capture({python, "-c", "import google.protobuf"}).exit_code != 0) {
    WARN("skipped the protobuf cross-check: " << python
                                              << " cannot import google.protobuf (apt-get install python3-protobuf)");
  } else {
    const CapturedRun checked =
        run_and_capture({python, kSource + "/tests/integration/tfevents_protobuf_check.py", files[0]});
    INFO(checked.out << checked.err);
    CHECK(checked.exit_code == 0);
    CHECK(checked.out.rfind("ok 7\n", 0) == 0);
    CHECK_THAT(checked.out, Contains("\n10 train/loss=") && Contains("\n20 eval/loss="));
  }

  // A second launch with the same run id (a resumed run) appends to the same metrics file.
  ChildProcess again = start_process(job_args(dir, "metrics", {"train.max_steps=20", "log.metrics_every_steps=10"}),
                                     dir / "again", {{"OMP_NUM_THREADS", "1"}});
  REQUIRE(wait_for_exit(again.pid, 120s) == 0);
  CHECK(split_lines(read_text(run_dir + "/metrics.jsonl")).size() == lines.size() + 2);
  CHECK(tensorboard_files(run_dir).size() == 2);  // a new event file per worker process, as TensorBoard expects
}

TEST_CASE("no metrics files when they are switched off, and a note without the launcher", "[metrics]") {
  TempDir dir;
  ChildProcess launcher = start_process(
      job_args(dir, "quiet", {"train.max_steps=10", "log.metrics_every_steps=0", "log.tensorboard=false"}),
      dir / "launcher", {{"OMP_NUM_THREADS", "1"}});
  REQUIRE(wait_for_exit(launcher.pid, 120s) == 0);
  CHECK(fs::exists(dir / "quiet"));
  CHECK_FALSE(fs::exists(dir / "quiet/metrics.jsonl"));
  CHECK_FALSE(fs::exists(dir / "quiet/tensorboard"));

  // The worker on its own (world size 1, no MGTRAIN_RUN_DIR): says once that it writes no files, and writes none.
  ChildProcess alone = start_process({kBin + "/mgtrain-worker", kSource + "/configs/bench/mlp-64.yaml",
                                      "data.synthetic_samples=512", "train.max_steps=5", "log.every_steps=1"},
                                     dir / "alone", {{"OMP_NUM_THREADS", "1"}, {"MGTRAIN_RUN_DIR", ""}});
  REQUIRE(wait_for_exit(alone.pid, 120s) == 0);
  const std::string out = read_text(alone.out_path);
  INFO(out << read_text(alone.err_path));
  CHECK_THAT(out, Contains("not started by `mgtrain launch`"));
  CHECK_THAT(out, Contains("mgtrain: step 5/5 epoch 1"));  // stdout is a file: plain lines
}

TEST_CASE("on a terminal the launcher shows rank 0's live bar, the rank's log keeps plain lines", "[metrics][tty]") {
  TempDir dir;
  std::vector<std::string> argv =
      job_args(dir, "bar", {"train.max_steps=200", "log.every_steps=50", "train.eval_every_steps=100"});
  int code = -1;
  const std::string console = run_on_terminal(argv, 120, code);
  INFO(console);
  REQUIRE(code == 0);
  // The bar is redrawn in place ("\r...\x1b[K") with the rank prefix and ends as an ordinary line at 100%.
  CHECK_THAT(console, Contains("\r[rank 0] epoch 1 step "));
  CHECK_THAT(console, Contains("\x1b[K"));
  CHECK(std::regex_search(
      console,
      std::regex(
          R"(\[rank 0\] epoch [0-9]+ step 200/200 \[=+\] 100% loss [0-9.]+ lr [0-9.e-]+ [0-9]+ samples/s in [0-9]+s\x1b\[K\r?\n)")));
  // Other lines clear the bar first and are whole.
  CHECK_THAT(console, Contains("\r\x1b[K[rank 0] mgtrain: eval (periodic, step 100)"));
  CHECK(console.find("mgtrain: step 50/200") == std::string::npos);  // the bar replaces the plain lines on the console
  CHECK(console.find('\x1e') == std::string::npos);
  CHECK_THAT(console, Contains("\"summary\""));

  // The log file reads as if there had been no terminal: plain lines, no bar, no carriage returns.
  const std::string log = read_text(dir / "bar/attempt_0/rank_0/stdout.log");
  INFO(log);
  CHECK_THAT(log, Contains("mgtrain: step 50/200 epoch 1 loss "));
  CHECK_THAT(log, Contains("mgtrain: step 200/200 epoch 4 loss "));  // 64 steps per epoch
  CHECK_THAT(log, Contains("mgtrain: eval (periodic, step 100)"));
  CHECK(log.find('\r') == std::string::npos);
  CHECK(log.find('\x1e') == std::string::npos);
  CHECK(log.find("step 200/200 [") == std::string::npos);
}

TEST_CASE("the worker alone on a terminal draws the bar itself and keeps it at the end", "[metrics][tty]") {
  int code = -1;
  const std::string console = run_on_terminal(
      {kBin + "/mgtrain-worker", kSource + "/configs/bench/mlp-64.yaml", "data.synthetic_samples=2048",
       "train.max_steps=100", "train.eval_every_steps=50", "log.metrics_every_steps=0", "log.tensorboard=false"},
      100, code);
  INFO(console);
  REQUIRE(code == 0);
  CHECK(console.find("\x1e") == std::string::npos);
  CHECK(console.find("mgtrain: step 50/100") == std::string::npos);  // the bar instead of the lines
  // Drawn with the cursor left at its start ("\r<bar>\x1b[K\r"), so another line overwrites it; fitted to the
  // terminal's 100 columns.
  CHECK(std::regex_search(
      console, std::regex("\repoch 1 step [0-9]+/100 \\[[ =>]+\\] +[0-9]+% loss [0-9.]+ lr [0-9.e-]+ [0-9]+ samples/s "
                          "ETA [0-9]+s\x1b\\[K\r")));
  CHECK_THAT(console, Contains("\x1b[Kmgtrain: eval (periodic, step 50)"));  // the bar cleared for the eval line
  CHECK(std::regex_search(
      console,
      std::regex("epoch [0-9]+ step 100/100 \\[=+\\] 100% loss [0-9.]+ lr [0-9.e-]+ [0-9]+ samples/s in [0-9]+s"
                 "\x1b\\[K\r?\n")));
  CHECK_THAT(console, Contains("{\"summary\""));
}

TEST_CASE("SIGUSR2 saves a checkpoint at an agreed step and training goes on", "[metrics][sigusr2]") {
  TempDir dir;
  const std::string checkpoints = dir / "ckpt";
  // Slow enough to signal mid-run: 1500 steps, a line per step to watch.
  ChildProcess launcher =
      start_process(job_args(dir, "usr2",
                             {"train.max_steps=1500", "log.every_steps=1", "checkpoint.dir=" + checkpoints,
                              "checkpoint.every_steps=0", "checkpoint.every_epochs=0", "checkpoint.at_end=false",
                              "checkpoint.keep_last=10"}),
                    dir / "launcher", {{"OMP_NUM_THREADS", "1"}});
  REQUIRE(wait_until([&] { return read_text(launcher.out_path).find("mgtrain: step 100/1500") != std::string::npos; },
                     90s));
  SECTION("to the launcher, which forwards it to every worker") { REQUIRE(kill(launcher.pid, SIGUSR2) == 0); }
  SECTION("to rank 1 only: rank 0 still saves, at the step all ranks agreed on") {
    const std::map<int, pid_t> workers = worker_pids(launcher.pid);
    REQUIRE(workers.count(1) == 1);
    REQUIRE(kill(workers.at(1), SIGUSR2) == 0);
  }
  const std::optional<int> code = wait_for_exit(launcher.pid, 120s);
  if (!code) kill(launcher.pid, SIGKILL);
  const std::string out = read_text(launcher.out_path);
  INFO(out << read_text(launcher.err_path));
  REQUIRE(code == 0);
  std::smatch saved;
  REQUIRE(std::regex_search(out, saved, std::regex(checkpoint_line_regex("requested"))));
  const long step = std::stol(saved[1]);
  CHECK(step > 100);
  CHECK(step < 1500);
  CHECK(fs::exists(checkpoints));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(checkpoints))
    files += entry.path().extension() == ".safetensors" ? 1 : 0;
  CHECK(files == 1);  // one save for the one request, nothing else (every_steps, epoch end, at_end are off)
  CHECK_THAT(out, Contains("mgtrain: step 1500/1500"));  // it went on to the end
  CHECK_THAT(out, Contains("\"steps\":1500"));
}

TEST_CASE("SIGUSR2 without checkpoints: a warning, and training goes on", "[metrics][sigusr2]") {
  TempDir dir;
  ChildProcess launcher =
      start_process(job_args(dir, "nockpt", {"train.max_steps=1500", "log.every_steps=1"}),  // the bench config: dir ""
                    dir / "launcher", {{"OMP_NUM_THREADS", "1"}});
  REQUIRE(wait_until([&] { return read_text(launcher.out_path).find("mgtrain: step 100/1500") != std::string::npos; },
                     90s));
  REQUIRE(kill(launcher.pid, SIGUSR2) == 0);
  const std::optional<int> code = wait_for_exit(launcher.pid, 120s);
  if (!code) kill(launcher.pid, SIGKILL);
  const std::string err = read_text(launcher.err_path);
  INFO(read_text(launcher.out_path) << err);
  REQUIRE(code == 0);
  CHECK_THAT(err, Contains("SIGUSR2 asked for a checkpoint at step") &&
                      Contains("checkpoints are off (checkpoint.dir is empty)"));
  CHECK_THAT(read_text(launcher.out_path), Contains("\"steps\":1500"));
}

TEST_CASE("SIGUSR2 right after the start-up banner is not lost and kills nobody", "[metrics][sigusr2]") {
  TempDir dir;
  const std::string checkpoints = dir / "ckpt";
  ChildProcess launcher =
      start_process(job_args(dir, "early",
                             {"train.max_steps=50", "log.every_steps=1", "checkpoint.dir=" + checkpoints,
                              "checkpoint.every_steps=0", "checkpoint.every_epochs=0", "checkpoint.at_end=false"}),
                    dir / "launcher", {{"OMP_NUM_THREADS", "1"}});
  // The banner comes after the data and model are built, before the first step: signal right then.
  REQUIRE(
      wait_until([&] { return read_text(launcher.out_path).find("[rank 0] mgtrain: ") != std::string::npos; }, 90s));
  REQUIRE(kill(launcher.pid, SIGUSR2) == 0);
  const std::optional<int> code = wait_for_exit(launcher.pid, 120s);
  if (!code) kill(launcher.pid, SIGKILL);
  const std::string out = read_text(launcher.out_path);
  INFO(out << read_text(launcher.err_path));
  REQUIRE(code == 0);
  CHECK(std::regex_search(out, std::regex(checkpoint_line_regex("requested"))));
  CHECK_THAT(out, Contains("\"steps\":50"));
}
