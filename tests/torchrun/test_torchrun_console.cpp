// The console of the torchrun personality against torch 2.15's torchrun: worker lines as written unless teed, teed
// streams behind "[default0]:" or the prefix template, --local-ranks-filter, the filtered files of
// --duplicate-*-filters; `mgtrain launch` keeps "[rank N] ". Each case has the output torchrun printed when it was
// written, which mgtrain must print byte for byte; when the venv (MGTRAIN_TORCH2_VENV) is there, torchrun is run too
// and must print the same lines per rank (lines_by_rank: its own output varies with the machine's load).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "integration/launch_fixture.hpp"
#include "process/run_capture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

namespace {

// Two ranks; rank 1 writes only after rank 0 is done (a file named after their launcher's pid) and 0.3 s more, so
// that both launchers print the ranks in one order (torchrun's tee polls its files every 0.1 s).
const char* kWorker = R"(import os, sys, time
r = int(os.environ["LOCAL_RANK"])
done = "rank0.%d.done" % os.getppid()
deadline = time.time() + 30
while r == 1 and not os.path.exists(done) and time.time() < deadline:
    time.sleep(0.02)
if r == 1:
    time.sleep(0.3)
print("@@ out", r, "apple", flush=True)
print("@@ err", r, "orange", file=sys.stderr, flush=True)
print("@@ out", r, "pear", flush=True)
if r == 0:
    open(done, "w").close()
)";

struct Console {
  std::string out, err;  // the workers' lines ("@@") of each stream, in order
};

// The lines of `text` that contain "@@" (the launchers' own messages left out).
std::string worker_lines(const std::string& text) {
  std::string lines;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string line = text.substr(at, end - at);
    if (line.find("@@") != std::string::npos) lines += line;
    at = end;
  }
  return lines;
}

// torchrun's console as its format promises it, whatever the machine's load: torchrun's tee threads poll the ranks'
// files every 0.1 s, so on a busy machine one rank's lines may come before or between another's, and a line read in
// two pieces gets its header twice ("[default0]:@@ out 0[default0]: apple"). So each rank's lines, in their order, with
// a header repeated inside a line taken out: what every run of torchrun prints, busy or not. (mgtrain's console is
// compared byte for byte: it reads each rank's pipe as the rank writes it.)
std::map<std::string, std::vector<std::string>> lines_by_rank(const std::string& text,
                                                              const std::vector<std::string>& headers) {
  std::map<std::string, std::vector<std::string>> ranks;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end;
    std::string line = text.substr(at, end - at);
    at = end + 1;
    for (const std::string& header : headers) {
      for (std::size_t inside = line.find(header, 1); inside != std::string::npos; inside = line.find(header, 1))
        line.erase(inside, header.size());
    }
    const std::size_t mark = line.find("@@ ");
    if (mark == std::string::npos) continue;
    const std::size_t number = line.find_first_of("0123456789", mark);  // "@@ out 1 apple": rank 1
    ranks[number == std::string::npos ? "" : line.substr(number, 1)].push_back(line);
  }
  return ranks;
}

// The headers a teed line of local rank 0 or 1 may start with in these cases.
const std::vector<std::string> kHeaders = {"[default0]:",   "[default1]:", "<trainer|0|0>",
                                           "<trainer|1|1>", "0: ",         "1: "};

std::string torchrun_path() { return std::string(MGTRAIN_TORCH2_VENV) + "/bin/torchrun"; }
bool have_torchrun() { return access(torchrun_path().c_str(), X_OK) == 0; }

// Runs `launcher` (argv before the options) with --nproc-per-node 2, `args`, and worker.py in `dir`.
Console run_console(const TempDir& dir, std::vector<std::string> launcher, const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env = {}) {
  launcher.insert(launcher.end(), {"--nproc-per-node", "2"});
  launcher.insert(launcher.end(), args.begin(), args.end());
  launcher.push_back("worker.py");
  CaptureOptions options;
  options.set_env = env;
  options.working_directory = dir.path();
  options.own_process_group = true;
  options.timeout_s = 50;
  const CapturedRun run = run_and_capture(launcher, options);
  INFO(launcher.front() << "\nstdout:\n" << run.out << "\nstderr:\n" << run.err);
  REQUIRE(run.exit_code == 0);
  return Console{worker_lines(run.out), worker_lines(run.err)};
}

struct Case {
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string out, err;  // what torchrun 2.15 printed
};

// `mgtrain torchrun` prints what torchrun printed, and torchrun (when there) still does.
void check_like_torchrun(const Case& c) {
  TempDir dir;
  write_script(dir / "worker.py", kWorker);
  std::string shown;
  for (const auto& arg : c.args) shown += " " + arg;
  for (const auto& [name, value] : c.env) shown += " (" + name + "=" + value + ")";
  INFO("torchrun --nproc-per-node 2" << shown << " worker.py");
  const Console mg = run_console(dir, {kMgtrain, "torchrun", "--log-dir", dir / "runs"}, c.args, c.env);
  CHECK(mg.out == c.out);
  CHECK(mg.err == c.err);
  if (!have_torchrun()) return;
  const Console torch = run_console(dir, {torchrun_path(), "--log-dir", dir / "torch_logs"}, c.args, c.env);
  CHECK(lines_by_rank(torch.out, kHeaders) == lines_by_rank(c.out, kHeaders));
  CHECK(lines_by_rank(torch.err, kHeaders) == lines_by_rank(c.err, kHeaders));
}

const std::string kPlainOut = "@@ out 0 apple\n@@ out 0 pear\n@@ out 1 apple\n@@ out 1 pear\n";
const std::string kPlainErr = "@@ err 0 orange\n@@ err 1 orange\n";
const std::string kTeedOut =
    "[default0]:@@ out 0 apple\n[default0]:@@ out 0 pear\n[default1]:@@ out 1 apple\n[default1]:@@ out 1 pear\n";
const std::string kTeedErr = "[default0]:@@ err 0 orange\n[default1]:@@ err 1 orange\n";

void report_torchrun() {
  if (!have_torchrun()) {
    WARN("torchrun comparison skipped: no torch 2.15 venv at " << MGTRAIN_TORCH2_VENV
                                                               << " (scripts/torch2-env.sh creates it); "
                                                                  "checked against the recorded output only");
  }
}

}  // namespace

TEST_CASE("torchrun's console: workers' lines as written when not teed", "[torchrun_console]") {
  report_torchrun();
  check_like_torchrun({{}, {}, kPlainOut, kPlainErr});
}

TEST_CASE("torchrun's console: the rank filter shows only the ranks it names", "[torchrun_console]") {
  check_like_torchrun({{"--local-ranks-filter", "1"}, {}, "@@ out 1 apple\n@@ out 1 pear\n", "@@ err 1 orange\n"});
}

TEST_CASE("torchrun's console: teed streams behind [<role><local rank>]:", "[torchrun_console]") {
  check_like_torchrun({{"--tee", "3"}, {}, kTeedOut, kTeedErr});
}

TEST_CASE("torchrun's console: a redirected stream not teed is not shown", "[torchrun_console]") {
  check_like_torchrun({{"--redirects", "3", "--tee", "1"}, {}, kTeedOut, ""});
}

TEST_CASE("torchrun's console: the rank filter applies to teed streams", "[torchrun_console]") {
  check_like_torchrun({{"--tee", "3", "--local-ranks-filter", "1"},
                       {},
                       "[default1]:@@ out 1 apple\n[default1]:@@ out 1 pear\n",
                       "[default1]:@@ err 1 orange\n"});
}

const std::vector<std::string> kRoleTemplate = {"--role", "trainer", "--log-line-prefix-template",
                                                "<${role_name}|${rank}|${local_rank}>"};

TEST_CASE("torchrun's console: the prefix template is not used for streams that are not teed", "[torchrun_console]") {
  check_like_torchrun({kRoleTemplate, {}, kPlainOut, kPlainErr});
}

TEST_CASE("torchrun's console: the prefix template replaces the header of teed streams", "[torchrun_console]") {
  std::vector<std::string> teed = kRoleTemplate;
  teed.insert(teed.end(), {"--tee", "2"});
  check_like_torchrun({teed, {}, kPlainOut, "<trainer|0|0>@@ err 0 orange\n<trainer|1|1>@@ err 1 orange\n"});
}

TEST_CASE("torchrun's console: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE is the template", "[torchrun_console]") {
  check_like_torchrun({{"--tee", "1"},
                       {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${rank}: "}},
                       "0: @@ out 0 apple\n0: @@ out 0 pear\n1: @@ out 1 apple\n1: @@ out 1 pear\n",
                       kPlainErr});
}

TEST_CASE("invoked as torchrun (argv[0]) the console is torchrun's, mgtrain launch keeps [rank N]",
          "[torchrun_console]") {
  TempDir dir;
  write_script(dir / "worker.py", kWorker);
  std::filesystem::create_symlink(kMgtrain, dir / "torchrun");
  const Console linked = run_console(dir, {dir / "torchrun", "--log-dir", dir / "runs"}, {"--tee", "3"});
  CHECK(linked.out == kTeedOut);
  CHECK(linked.err == kTeedErr);
  const Console launch = run_console(dir, {kMgtrain, "launch", "--log-dir", dir / "runs"}, {"--tee", "3"});
  CHECK(launch.out ==
        "[rank 0] @@ out 0 apple\n[rank 0] @@ out 0 pear\n[rank 1] @@ out 1 apple\n[rank 1] @@ out 1 pear\n");
  CHECK(launch.err == "[rank 0] @@ err 0 orange\n[rank 1] @@ err 1 orange\n");
  const Console filtered =
      run_console(dir, {kMgtrain, "launch", "--log-dir", dir / "runs"}, {"--local-ranks-filter", "1"});
  CHECK(filtered.out == "[rank 1] @@ out 1 apple\n[rank 1] @@ out 1 pear\n");
  CHECK(filtered.err == "[rank 1] @@ err 1 orange\n");
  // mgtrain launch applies the template to every console line, teed or not (${role_name} is --role's).
  const Console role = run_console(dir, {kMgtrain, "launch", "--log-dir", dir / "runs"},
                                   {"--role", "trainer", "--log-line-prefix-template", "${role_name}${local_rank}| "});
  CHECK(role.err == "trainer0| @@ err 0 orange\ntrainer1| @@ err 1 orange\n");
  const Console templated =
      run_console(dir, {kMgtrain, "launch", "--log-dir", dir / "runs"}, {"--log-line-prefix-template", "${rank}| "});
  CHECK(templated.err == "0| @@ err 0 orange\n1| @@ err 1 orange\n");
}

TEST_CASE("duplicate filters: matching teed lines of every rank in attempt_0/filtered_*.log", "[torchrun_console]") {
  report_torchrun();
  TempDir dir;
  write_script(dir / "worker.py", kWorker);
  // ",," is a literal comma: "pear,x" matches nothing.
  const std::vector<std::string> args = {"--rdzv-id",
                                         "job",
                                         "--tee",
                                         "3",
                                         "--duplicate-stdout-filters",
                                         "pear,,x,apple",
                                         "--duplicate-stderr-filters",
                                         "orange",
                                         "--local-ranks-filter",
                                         "1"};
  const std::string want_out = "[default1]:@@ out 1 apple\n";
  const std::string want_err = "[default1]:@@ err 1 orange\n";
  const Console mg = run_console(dir, {kMgtrain, "torchrun", "--log-dir", dir / "runs"}, args);
  CHECK(mg.out == "[default1]:@@ out 1 apple\n[default1]:@@ out 1 pear\n");  // the console is unchanged
  CHECK(read_text(dir / "runs/job/attempt_0/filtered_stdout.log") == want_out);
  CHECK(read_text(dir / "runs/job/attempt_0/filtered_stderr.log") == want_err);
  // Not teed, torchrun copies nothing, but creates the file.
  run_console(dir, {kMgtrain, "torchrun", "--log-dir", dir / "runs"},
              {"--rdzv-id", "plain", "--duplicate-stdout-filters", "apple"});
  CHECK(file_exists(dir / "runs/plain/attempt_0/filtered_stdout.log"));
  CHECK(read_text(dir / "runs/plain/attempt_0/filtered_stdout.log").empty());
  // In mgtrain launch every console line has a prefix, so every console line is a candidate; PET_ works too.
  run_console(dir, {kMgtrain, "launch", "--log-dir", dir / "runs", "--run-id", "own"}, {},
              {{"PET_DUPLICATE_STDOUT_FILTERS", "pear"}});
  CHECK(read_text(dir / "runs/own/attempt_0/filtered_stdout.log") ==
        "[rank 0] @@ out 0 pear\n[rank 1] @@ out 1 pear\n");
  CHECK_FALSE(file_exists(dir / "runs/own/attempt_0/filtered_stderr.log"));
  if (!have_torchrun()) return;
  run_console(dir, {torchrun_path(), "--log-dir", dir / "torch_logs"}, args);
  int files = 0;
  for (const auto& run : std::filesystem::directory_iterator(dir / "torch_logs")) {  // <run id>_<random>
    // torchrun copies each piece it read that matches: on a busy machine a line read in two pieces is copied in part.
    const std::string out = read_text((run.path() / "attempt_0/filtered_stdout.log").string());
    CHECK_THAT(out, Catch::StartsWith("[default1]:") && Catch::Contains("apple") && !Catch::Contains("pear"));
    const std::string err = read_text((run.path() / "attempt_0/filtered_stderr.log").string());
    CHECK_THAT(err, Catch::StartsWith("[default1]:") && Catch::Contains("orange"));
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("torchrun's console: bytes as written, carriage returns end teed lines, a last line is ended",
          "[torchrun_console]") {
  TempDir dir;
  write_script(dir / "worker.py", R"(import os, sys
if os.environ["LOCAL_RANK"] == "0":
    sys.stdout.buffer.write(b"@@ bin \xff\x01 x\n@@ a\r@@ b\n@@ crlf\r\n@@ end")
    sys.stdout.flush()
)");
  const Console plain = run_console(dir, {kMgtrain, "torchrun", "--log-dir", dir / "runs"}, {});
  // Not teed: the worker's bytes; the unfinished last line is ended so the next output starts a line (torchrun
  // leaves it open).
  CHECK(plain.out == "@@ bin \xff\x01 x\n@@ a\r@@ b\n@@ crlf\r\n@@ end\n");
  const Console teed = run_console(dir, {kMgtrain, "torchrun", "--log-dir", dir / "runs"}, {"--tee", "1"});
  // Teed: torchrun's universal newlines ('\r' and "\r\n" end a line); invalid UTF-8 is kept (torchrun writes U+FFFD).
  CHECK(teed.out ==
        "[default0]:@@ bin \xff\x01 x\n[default0]:@@ a\n[default0]:@@ b\n[default0]:@@ crlf\n[default0]:@@ end\n");
}

TEST_CASE("torchrun's console on a terminal: a teed stream is no terminal for the worker, as torchrun's file",
          "[torchrun_console][tty]") {
  TempDir dir;
  write_script(dir / "tty.py", R"(import os, sys
print("@@ rank", os.environ["LOCAL_RANK"], "stdout", sys.stdout.isatty(), "stderr", sys.stderr.isatty(), flush=True)
)");
  const std::string command =
      kMgtrain + " torchrun --log-dir " + dir / "runs" + " --nproc-per-node 1 --tee 1 " + dir / "tty.py";
  const CapturedRun run = run_and_capture({"script", "-q", "-e", "-c", command, "/dev/null"}, CaptureOptions{});
  INFO(run.out + run.err);
  REQUIRE(run.exit_code == 0);
  // torchrun 2.15 prints the same for its rank 0 (and, unlike mgtrain's launch.tty auto, for every rank).
  CHECK_THAT(run.out, Catch::Contains("[default0]:@@ rank 0 stdout False stderr True"));
}
