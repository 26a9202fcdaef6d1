// Heartbeat lines as JSON (see heartbeat_line.hpp), read and written with nlohmann::json.
#include "contract/heartbeat_line.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace mgtrain {
namespace {

std::optional<double> finite_number(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  const double value = it->get<double>();
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

const char* start_source_name(StartSource source) {
  switch (source) {
    case StartSource::kNone:
      return "none";
    case StartSource::kCheckpoint:
      return "checkpoint";
    case StartSource::kSnapshot:
      return "snapshot";
  }
  return "none";
}

std::optional<StartSource> parse_start_source(std::string_view name) {
  for (const StartSource source : {StartSource::kNone, StartSource::kCheckpoint, StartSource::kSnapshot}) {
    if (name == start_source_name(source)) return source;
  }
  return std::nullopt;
}

std::optional<std::int64_t> parse_progress_step(std::string_view text) {
  const std::optional<ProgressReport> report = parse_progress(text);
  if (!report) return std::nullopt;
  return report->step;
}

std::optional<ProgressReport> parse_progress(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  if (text.front() == '{') {
    std::optional<HeartbeatInfo> line = parse_heartbeat_line(text);
    if (!line) return std::nullopt;
    ProgressReport report{line->step, std::nullopt};
    if (line->wait) report.busy = line->time - *line->wait;
    return report;
  }
  if (text.size() > 18) return std::nullopt;  // fits an int64 without overflow checks
  std::int64_t step = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return ProgressReport{step, std::nullopt};
}

std::string format_heartbeat_line(const HeartbeatInfo& info) {
  nlohmann::json line = {{"step", info.step}, {"loss", nullptr}, {"time", info.time}};
  if (info.loss && std::isfinite(*info.loss)) line["loss"] = *info.loss;
  if (info.wait && std::isfinite(*info.wait)) line["wait"] = *info.wait;
  if (info.start_step) line["start"] = *info.start_step;
  if (info.start_source) line["from"] = start_source_name(*info.start_source);
  if (info.snapshot_step) line["snapshot"] = *info.snapshot_step;
  if (info.snapshot_time && std::isfinite(*info.snapshot_time)) line["snapshot_time"] = *info.snapshot_time;
  return line.dump();
}

std::optional<HeartbeatInfo> parse_heartbeat_line(std::string_view text) {
  const nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return std::nullopt;
  std::optional<double> step = finite_number(object, "step");
  std::optional<double> time = finite_number(object, "time");
  if (!step || !time) return std::nullopt;
  HeartbeatInfo info;
  info.step = static_cast<std::int64_t>(*step);
  info.loss = finite_number(object, "loss");
  info.time = *time;
  info.wait = finite_number(object, "wait");
  if (info.wait && *info.wait < 0) info.wait.reset();
  if (const std::optional<double> start = finite_number(object, "start"); start && *start >= 0) {
    info.start_step = static_cast<std::int64_t>(*start);
  }
  if (const auto from = object.find("from"); from != object.end() && from->is_string()) {
    info.start_source = parse_start_source(from->get<std::string>());
  }
  if (const std::optional<double> snapshot = finite_number(object, "snapshot"); snapshot && *snapshot >= 0) {
    info.snapshot_step = static_cast<std::int64_t>(*snapshot);
    info.snapshot_time = finite_number(object, "snapshot_time");
  }
  return info;
}

}  // namespace mgtrain
