// metrics.jsonl reading: rows and series, a torn last line left for later, repeated steps after a restart,
// lines that are not rows, and following a file while it grows.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "observe/metrics_reader.hpp"
#include "support/temp_dir.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const char* kTrain10 =
    R"({"kind":"train","step":10,"epoch":0,"time":1763800000.5,"loss":0.9,"lr":0.01,"samples_per_s":5000.5,"step_time_ms":12.3,"rss_bytes":123456789,"attempt":0})";
const char* kTrain20 =
    R"({"kind":"train","step":20,"epoch":0,"time":1763800001.5,"loss":0.7,"lr":0.01,"samples_per_s":5100,"step_time_ms":12.1,"rss_bytes":123456789,"attempt":0})";
const char* kEval20 =
    R"({"kind":"eval","step":20,"epoch":0,"time":1763800002,"eval.loss":0.65,"eval.accuracy":0.71,"attempt":0})";

void append(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

}  // namespace

TEST_CASE("metrics reader: train and eval rows become series by step", "[metrics]") {
  MetricsLog log;
  const std::string text = std::string(kTrain20) + "\n" + kTrain10 + "\n" + kEval20 + "\n";
  CHECK(log.add_lines(text) == text.size());
  CHECK(log.size() == 3);
  CHECK(log.problem_count() == 0);
  const auto loss = log.series("loss");
  REQUIRE(loss.size() == 2);
  CHECK(loss[0].step == 10);
  CHECK(loss[0].value == Approx(0.9));
  CHECK(loss[1].step == 20);
  CHECK(loss[1].value == Approx(0.7));
  const auto accuracy = log.series("eval.accuracy");
  REQUIRE(accuracy.size() == 1);
  CHECK(accuracy[0].value == Approx(0.71));
  CHECK(log.series("no.such.metric").empty());
  CHECK(log.metric_names() == std::vector<std::string>{"eval.accuracy", "eval.loss", "loss", "lr", "rss_bytes",
                                                       "samples_per_s", "step_time_ms"});
  CHECK(log.last_step() == 20);
  const auto latest = log.latest("train");
  REQUIRE(latest);
  CHECK(latest->step == 20);
  CHECK(latest->value("rss_bytes") == Approx(123456789));
  CHECK(latest->value("time") == Approx(1763800001.5));
  CHECK_FALSE(log.latest("resources"));
}

TEST_CASE("metrics reader: a torn last line is not read until it is complete", "[metrics]") {
  MetricsLog log;
  const std::string whole = std::string(kTrain10) + "\n";
  const std::string torn = std::string(kTrain20).substr(0, 30);
  CHECK(log.add_lines(whole + torn) == whole.size());
  CHECK(log.size() == 1);
  CHECK(log.problem_count() == 0);  // a torn line is not a problem, only unfinished
}

TEST_CASE("metrics reader: repeated steps after a restart keep the last value", "[metrics]") {
  // Attempt 0 reached step 30, the restart resumed from a step-10 checkpoint and wrote 20 and 30 again.
  MetricsLog log;
  log.add_lines(R"({"kind":"train","step":10,"loss":1.0,"attempt":0})"
                "\n"
                R"({"kind":"train","step":20,"loss":2.0,"attempt":0})"
                "\n"
                R"({"kind":"train","step":30,"loss":3.0,"attempt":0})"
                "\n"
                R"({"kind":"train","step":20,"loss":0.2,"attempt":1})"
                "\n"
                R"({"kind":"train","step":30,"loss":0.3,"attempt":1})"
                "\n"
                R"({"kind":"eval","step":30,"eval.loss":0.25,"attempt":1})"
                "\n");
  const auto loss = log.series("loss");
  REQUIRE(loss.size() == 3);
  CHECK(loss[0].value == Approx(1.0));
  CHECK(loss[1].value == Approx(0.2));
  CHECK(loss[2].value == Approx(0.3));
  CHECK(log.latest("train")->value("attempt") == Approx(1));
  CHECK(log.size() == 4);  // the eval row at step 30 is a different kind, not a repeat
  CHECK(log.accepted_rows() == 6);
}

TEST_CASE("metrics reader: lines that are not rows are skipped and described", "[metrics]") {
  MetricsLog log;
  log.add_lines(
      std::string(kTrain10) + "\n" +
      "garbage\n"
      R"({"kind":"train","loss":0.5})"
      "\n"
      R"({"kind":"train","step":1.5,"loss":0.5})"
      "\n"
      "\n" +
      R"({"kind":"train","step":40,"loss":NaN,"lr":null,"note":"a \"quoted\" \u00e9 text","nested":{"a":[1,{"b":"}"}]}})"
      "\n");
  CHECK(log.size() == 2);
  CHECK(log.problem_count() == 3);
  REQUIRE(log.problems().size() == 3);
  CHECK_THAT(log.problems()[0], Contains("line 2") && Contains("not a JSON object"));
  CHECK_THAT(log.problems()[1], Contains("line 3") && Contains("no \"step\""));
  CHECK_THAT(log.problems()[2], Contains("line 4") && Contains("not an integer"));
  const auto row = log.latest("train");
  REQUIRE(row);
  CHECK(row->step == 40);
  CHECK(std::isnan(*row->value("loss")));
  CHECK_FALSE(row->value("lr"));  // null: absent
}

TEST_CASE("metrics reader: following a growing file reads only what is new", "[metrics]") {
  const testing::TempDir temp_dir("mgtrain-metrics-follow");
  const fs::path dir = temp_dir.path();
  const fs::path path = dir / "metrics.jsonl";
  MetricsFileReader reader(path.string());
  CHECK_FALSE(reader.refresh());
  CHECK_FALSE(reader.exists());

  append(path, std::string(kTrain10) + "\n" + std::string(kTrain20).substr(0, 25));
  CHECK(reader.refresh());
  CHECK(reader.exists());
  CHECK(reader.log().size() == 1);
  CHECK(reader.pending_bytes() == 25);

  append(path, std::string(kTrain20).substr(25) + "\n");
  CHECK(reader.refresh());
  CHECK(reader.log().size() == 2);
  CHECK(reader.pending_bytes() == 0);
  CHECK_FALSE(reader.refresh());  // nothing new

  append(path, "oops\n");
  reader.refresh();
  REQUIRE(reader.log().problems().size() == 1);
  CHECK_THAT(reader.log().problems()[0], Contains("line 3"));  // numbered across refreshes

  // Replaced by a shorter file: read again from the start.
  fs::remove(path);
  append(path, std::string(kEval20) + "\n");
  CHECK(reader.refresh());
  CHECK(reader.log().size() == 1);
  CHECK(reader.log().latest("eval"));

  CHECK(read_metrics_file(path.string()).size() == 1);
  CHECK(read_metrics_file((dir / "missing.jsonl").string()).empty());
}
