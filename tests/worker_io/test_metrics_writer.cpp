// metrics.jsonl: the rows' exact JSON, appending across writers (a resumed run), a torn last line ended
// before new rows, and the resident set size read from /proc.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "support/directory_listing.hpp"
#include "support/temp_dir.hpp"
#include "worker_io/metrics_writer.hpp"

using namespace mgtrain;
namespace fs = std::filesystem;

namespace {

TrainMetricsRow train_row() {
  TrainMetricsRow row;
  row.step = 120;
  row.epoch = 1;
  row.time = 1763800000.123;
  row.loss = 0.5312;
  row.lr = 0.01;
  row.samples_per_s = 5012.3;
  row.step_time_ms = 12.3;
  row.rss_bytes = 123456789;
  return row;
}

}  // namespace

TEST_CASE("train and eval rows are the agreed JSON", "[metrics]") {
  CHECK(train_metrics_json(train_row()) ==
        R"({"kind":"train","step":120,"epoch":1,"time":1763800000.123,"loss":0.5312,"lr":0.01,"samples_per_s":5012.3,)"
        R"("step_time_ms":12.3,"rss_bytes":123456789,"attempt":0})");
  TrainMetricsRow gpu = train_row();
  gpu.cuda_allocated_bytes = 1024;
  gpu.loss_scale = 65536.0;
  gpu.attempt = 2;
  gpu.loss = std::numeric_limits<double>::quiet_NaN();  // a diverged run: still valid JSON
  CHECK(train_metrics_json(gpu) ==
        R"({"kind":"train","step":120,"epoch":1,"time":1763800000.123,"loss":null,"lr":0.01,"samples_per_s":5012.3,)"
        R"("step_time_ms":12.3,"rss_bytes":123456789,"cuda_allocated_bytes":1024,"loss_scale":65536.0,"attempt":2})");
  EvalMetricsRow eval;
  eval.step = 500;
  eval.epoch = 1;
  eval.time = 1763800001.5;
  eval.loss = 0.41;
  eval.accuracy = 0.86;
  CHECK(
      eval_metrics_json(eval) ==
      R"({"kind":"eval","step":500,"epoch":1,"time":1763800001.5,"eval.loss":0.41,"eval.accuracy":0.86,"attempt":0})");
  eval.perplexity = 1.5;
  CHECK(
      eval_metrics_json(eval) ==
      R"({"kind":"eval","step":500,"epoch":1,"time":1763800001.5,"eval.loss":0.41,"eval.accuracy":0.86,"eval.perplexity":1.5,"attempt":0})");
}

TEST_CASE("a second writer appends, and a torn last line is ended first", "[metrics]") {
  const testing::TempDir dir("mgtrain-metrics");
  const fs::path path = dir / "metrics.jsonl";
  {
    MetricsWriter writer(path.string());
    writer.append(R"({"a":1})");
    CHECK(testing::read_all(path) == "{\"a\":1}\n");  // each row is on disk when append returns
    writer.append(R"({"a":2})");
  }
  {
    MetricsWriter resumed(path.string());
    resumed.append(R"({"a":3})");
  }
  CHECK(testing::read_all(path) == "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
  std::ofstream(path, std::ios::app) << R"({"a":4,"tor)";  // a writer killed mid-row
  {
    MetricsWriter after_crash(path.string());
    after_crash.append(R"({"a":5})");
  }
  CHECK(testing::read_all(path) == "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4,\"tor\n{\"a\":5}\n");
}

TEST_CASE("a metrics file that cannot be opened is named in the error", "[metrics]") {
  const testing::TempDir dir("mgtrain-metrics");
  CHECK_THROWS_WITH(MetricsWriter(dir / "missing/metrics.jsonl"),
                    Catch::Contains("missing/metrics.jsonl") && Catch::Contains("log.metrics_every_steps"));
}

TEST_CASE("the resident set size is this process's, in bytes", "[metrics]") {
  const std::int64_t before = resident_set_bytes();
  CHECK(before > 1024 * 1024);
  std::string touched(64 * 1024 * 1024, 'x');  // 64 MiB written: resident
  CHECK(resident_set_bytes() >= before + 60 * 1024 * 1024);
  CHECK(touched[12345] == 'x');
}
