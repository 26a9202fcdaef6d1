// Run history: summaries from run.json + metrics.jsonl (best metric, steps, durations, runs without a record),
// newest first, and finding a run by id or path with the known runs listed when it is unknown.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "observe/run_history.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

void write_record(const fs::path& dir, const std::string& id, const std::string& status, double start, double end) {
  fs::create_directories(dir / id);
  RunRecord record;
  record.run_id = id;
  record.start_time = start;
  if (status != "running") {
    finish_run_record(record, status, status == "succeeded" ? 0 : 1, 1);
    record.end_time = end;
  } else {
    record.launcher = this_launcher();  // this process: alive
  }
  write_run_record((dir / id).string(), record);
}

}  // namespace

TEST_CASE("run history: summaries newest first with steps and the best metric", "[run-history]") {
  const testing::TempDir temp_dir("mgtrain-run-history-list");
  const fs::path dir = temp_dir.path();
  write_record(dir, "old", "succeeded", 1000, 1100);
  write_record(dir, "new", "running", 3000, 0);
  write_record(dir, "mid", "failed", 2000, 2005.5);
  std::ofstream(dir / "old" / "metrics.jsonl") << R"({"kind":"train","step":50,"loss":1})"
                                                  "\n"
                                                  R"({"kind":"eval","step":50,"eval.loss":0.5,"eval.accuracy":0.7})"
                                                  "\n"
                                                  R"({"kind":"eval","step":100,"eval.loss":0.4,"eval.accuracy":0.6})"
                                                  "\n"
                                                  R"({"kind":"train","step":100,"loss":1})"
                                                  "\n";
  std::ofstream(dir / "mid" / "metrics.jsonl") << R"({"kind":"eval","step":5,"eval.loss":0.9})"
                                                  "\n"
                                                  R"({"kind":"eval","step":10,"eval.loss":0.8})"
                                                  "\n"
                                                  R"({"kind":"eval","step":15,"eval.loss":0.85})"
                                                  "\n";
  fs::create_directories(dir / "legacy");
  std::ofstream(dir / "legacy" / "config.yaml") << "launch: {}\n";
  fs::create_directories(dir / "not-a-run");

  const auto runs = list_runs(dir.string(), 3010);
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].run_id == "legacy");  // config.yaml written now: the newest
  CHECK(runs[0].status == "unknown");
  CHECK(runs[1].run_id == "new");
  CHECK(runs[1].status == "running");
  CHECK(*runs[1].duration_s == Approx(10));
  CHECK(runs[2].run_id == "mid");
  CHECK(*runs[2].duration_s == Approx(5.5));
  REQUIRE(runs[2].best);
  CHECK(runs[2].best->metric == "eval.loss");  // no accuracy: the lowest eval loss
  CHECK(runs[2].best->value == Approx(0.8));
  CHECK(runs[2].best->step == 10);
  CHECK(runs[2].steps == 15);  // no train rows: the last row's step
  CHECK(runs[3].run_id == "old");
  CHECK(runs[3].status == "succeeded");
  CHECK(runs[3].steps == 100);
  REQUIRE(runs[3].best);
  CHECK(runs[3].best->metric == "eval.accuracy");  // accuracy wins over loss, its maximum
  CHECK(runs[3].best->value == Approx(0.7));
  CHECK(runs[3].best->step == 50);
}

TEST_CASE("run history: a run is found by id or path, an unknown one lists the others", "[run-history]") {
  const testing::TempDir temp_dir("mgtrain-run-history-resolve");
  const fs::path dir = temp_dir.path();
  write_record(dir, "alpha", "succeeded", 1, 2);
  write_record(dir, "beta", "succeeded", 1, 2);
  CHECK(resolve_run_directory("alpha", dir.string()) == (dir / "alpha").string());
  CHECK(resolve_run_directory((dir / "beta").string(), "elsewhere") == (dir / "beta").string());
  CHECK_THROWS_AS(resolve_run_directory("alpah", dir.string()), UsageError);
  CHECK_THROWS_WITH(resolve_run_directory("alpah", dir.string()),
                    Contains("unknown run 'alpah'") && Contains("did you mean alpha?") && Contains("alpha, beta"));
  CHECK_THROWS_WITH(resolve_run_directory("x", (dir / "missing").string()), Contains("no log directory"));
  CHECK_THROWS_WITH(list_runs((dir / "missing").string(), 0), Contains("--log-dir"));
}
