// Reading a large metrics.jsonl: mgtrain's MetricsLog (its flat-object scanner) against nlohmann::json parsing
// each line and building the same rows. Build and run with scripts/bench/metrics_jsonl_bench.sh.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "observe/metrics_reader.hpp"

namespace {

std::string make_rows(int rows) {
  std::string text;
  for (int step = 1; step <= rows; ++step) {
    text += fmt::format(R"({{"kind":"train","step":{},"epoch":{},"time":{:.3f},"loss":{},"lr":0.01,"samples_per_s":{},)"
                        R"("step_time_ms":{},"rss_bytes":123456789,"attempt":0}})" "\n",
                        step, step / 1000, 1763800000.0 + step * 0.05, 2.0 / std::sqrt(step), 5000.0 + step % 97, 12.3 + step % 7);
    if (step % 100 == 0) {
      text += fmt::format(R"({{"kind":"eval","step":{},"epoch":{},"time":{:.3f},"eval.loss":{},"eval.accuracy":{},"attempt":0}})" "\n",
                          step, step / 1000, 1763800000.0 + step * 0.05, 1.0 / std::sqrt(step), 1.0 - 1.0 / std::sqrt(step));
    }
  }
  return text;
}

// What MetricsLog::add_line would do with nlohmann: parse the line, keep kind, integer step and numbers.
std::size_t nlohmann_rows(const std::string& text) {
  std::map<std::pair<std::string, std::int64_t>, std::map<std::string, double>> rows;
  std::size_t start = 0;
  for (std::size_t newline; (newline = text.find('\n', start)) != std::string::npos; start = newline + 1) {
    const nlohmann::json row = nlohmann::json::parse(text.begin() + start, text.begin() + newline, nullptr, false);
    if (!row.is_object()) continue;
    const auto step = row.find("step");
    if (step == row.end() || !step->is_number_integer()) continue;
    std::string kind;
    std::map<std::string, double> values;
    for (const auto& [key, value] : row.items()) {
      if (key == "kind" && value.is_string()) kind = value.get<std::string>();
      else if (key != "step" && value.is_number()) values[key] = value.get<double>();
    }
    rows[{kind, step->get<std::int64_t>()}] = std::move(values);
  }
  return rows.size();
}

template <class F>
double best_seconds(F run) {
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 200000;
  const std::string text = make_rows(rows);
  std::size_t scanner_rows = 0, json_rows = 0;
  const double scanner = best_seconds([&] {
    mgtrain::MetricsLog log;
    log.add_lines(text);
    scanner_rows = log.size();
  });
  const double json = best_seconds([&] { json_rows = nlohmann_rows(text); });
  std::printf("metrics.jsonl: %d train rows + %d eval rows, %.1f MB\n", rows, rows / 100, text.size() / 1e6);
  std::printf("  MetricsLog (flat-object scanner): %.3f s (%zu rows)\n", scanner, scanner_rows);
  std::printf("  nlohmann::json per line:          %.3f s (%zu rows)  %.1fx\n", json, json_rows, json / scanner);
}
