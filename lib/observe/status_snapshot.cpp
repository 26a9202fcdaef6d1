// Renders the status snapshot as JSON and Prometheus text, and reads/writes heartbeat lines (see status_snapshot.hpp).
#include "observe/status_snapshot.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/json_writer.hpp"
#include "observe/metrics_reader.hpp"

namespace mgtrain {
namespace {

// The number after "key": in a flat JSON object; nullopt when absent, null, or not a number.
std::optional<double> number_field(std::string_view text, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  std::size_t at = text.find(quoted);
  if (at == std::string_view::npos) return std::nullopt;
  at += quoted.size();
  while (at < text.size() && (text[at] == ' ' || text[at] == ':')) ++at;
  std::string rest(text.substr(at, 40));
  char* end = nullptr;
  double value = std::strtod(rest.c_str(), &end);
  if (end == rest.c_str() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::string curve_json(const std::vector<MetricPoint>& points, std::size_t max_points) {
  std::string out = "[";
  const std::size_t n = points.size();
  const std::size_t stride = max_points == 0 || n <= max_points ? 1 : (n + max_points - 1) / max_points;
  bool first = true;
  for (std::size_t index = 0; index < n; ++index) {
    if (index % stride != 0 && index + 1 != n) continue;  // thinned evenly, the last point kept
    out += std::string(first ? "" : ",") + "[" + std::to_string(points[index].step) + "," + json_number(points[index].value, 8) + "]";
    first = false;
  }
  return out + "]";
}

std::string optional_number(const std::optional<double>& value) { return value ? json_number(*value) : "null"; }

std::string gpu_json(const GpuSample& gpu) {
  auto known = [](double v) { return v < 0 ? std::string("null") : json_number(v); };
  return "{\"index\":" + std::to_string(gpu.index) + ",\"name\":" + json_quote(gpu.name) + ",\"uuid\":" + json_quote(gpu.uuid) +
         ",\"utilization_percent\":" + known(gpu.utilization_percent) +
         ",\"memory_used_bytes\":" + known(static_cast<double>(gpu.memory_used_bytes)) +
         ",\"memory_total_bytes\":" + known(static_cast<double>(gpu.memory_total_bytes)) +
         ",\"temperature_c\":" + known(gpu.temperature_c) + ",\"power_w\":" + known(gpu.power_w) + "}";
}

// Collects the samples of one metric so HELP and TYPE come once, before all of them.
class PrometheusMetric {
 public:
  PrometheusMetric(std::string name, std::string help, std::string type = "gauge")
      : name_(std::move(name)), help_(std::move(help)), type_(std::move(type)) {}
  void add(const std::string& labels, double value) {
    samples_ += name_ + (labels.empty() ? "" : "{" + labels + "}") + " " + format(value) + "\n";
  }
  void write(std::string& out) const {
    out += "# HELP " + name_ + " " + help_ + "\n# TYPE " + name_ + " " + type_ + "\n" + samples_;
  }

 private:
  static std::string format(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    char buffer[40];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    return buffer;
  }
  std::string name_, help_, type_, samples_;
};

}  // namespace

std::string metrics_curves_json(std::string_view text, std::size_t max_points) {
  MetricsLog log;  // complete lines only; the last row per (kind, step) wins
  log.add_lines(text);
  return "{\"train\":" + curve_json(log.series("loss"), max_points) + ",\"eval\":" + curve_json(log.series("eval.loss"), max_points) +
         "}";
}

std::string json_number(double value, int significant_digits) {
  if (!std::isfinite(value)) return "null";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*g", significant_digits, value);
  return buffer;
}

std::string status_to_json(const StatusSnapshot& s) {
  std::string out = "{\"run_id\":" + json_quote(s.run_id) + ",\"run_dir\":" + json_quote(s.run_dir) +
                    ",\"hostname\":" + json_quote(s.hostname) + ",\"node_rank\":" + std::to_string(s.node_rank) +
                    ",\"phase\":" + json_quote(s.phase) + ",\"attempt\":" + std::to_string(s.attempt) +
                    ",\"restarts\":" + std::to_string(s.attempt) + ",\"max_restarts\":" + std::to_string(s.max_restarts) +
                    ",\"start_time\":" + json_number(s.start_time, 15) + ",\"time\":" + json_number(s.time, 15) + ",\"ranks\":[";
  for (std::size_t i = 0; i < s.ranks.size(); ++i) {
    const RankStatus& r = s.ranks[i];
    if (i > 0) out += ",";
    out += "{\"rank\":" + std::to_string(r.rank) + ",\"local_rank\":" + std::to_string(r.local_rank) +
           ",\"pid\":" + std::to_string(r.pid) + ",\"state\":" + json_quote(r.state);
    if (r.heartbeat) {
      out += ",\"step\":" + std::to_string(r.heartbeat->step) + ",\"loss\":" + optional_number(r.heartbeat->loss) +
             ",\"last_heartbeat\":" + json_number(r.heartbeat->time, 15);
    } else {
      out += ",\"step\":null,\"loss\":null,\"last_heartbeat\":null";
    }
    out += ",\"cpu_percent\":" + optional_number(r.cpu_percent) +
           ",\"rss_bytes\":" + (r.rss_bytes ? std::to_string(*r.rss_bytes) : std::string("null")) + "}";
  }
  out += "],\"gpus\":[";
  for (std::size_t i = 0; i < s.gpus.size(); ++i) out += (i > 0 ? "," : "") + gpu_json(s.gpus[i]);
  out += "],\"driver_version\":" + (s.driver_version.empty() ? std::string("null") : json_quote(s.driver_version)) + "}";
  return out;
}

std::string prometheus_label_value(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string status_to_prometheus(const StatusSnapshot& s) {
  const std::string run = "run_id=\"" + prometheus_label_value(s.run_id) + "\"";
  PrometheusMetric attempt("mgtrain_attempt", "Current attempt of the worker group (0 = first start).");
  PrometheusMetric restarts("mgtrain_restarts_total", "Restarts of the worker group so far.", "counter");
  PrometheusMetric max_restarts("mgtrain_max_restarts", "Restarts allowed (launch.max_restarts).");
  PrometheusMetric up("mgtrain_rank_up", "1 while the rank's worker process runs, else 0.");
  PrometheusMetric step("mgtrain_rank_step", "Last training step the rank reported in its heartbeat.");
  PrometheusMetric loss("mgtrain_rank_loss", "Training loss of the rank's last heartbeat.");
  PrometheusMetric beat("mgtrain_rank_last_heartbeat_timestamp_seconds", "Unix time of the rank's last heartbeat.");
  PrometheusMetric cpu("mgtrain_rank_cpu_percent", "CPU use of the rank's worker process (100 = one core).");
  PrometheusMetric rss("mgtrain_rank_resident_memory_bytes", "Resident memory of the rank's worker process.");
  PrometheusMetric gpu_util("mgtrain_gpu_utilization_percent", "GPU busy time over the driver's sample period.");
  PrometheusMetric gpu_used("mgtrain_gpu_memory_used_bytes", "GPU memory in use.");
  PrometheusMetric gpu_total("mgtrain_gpu_memory_total_bytes", "GPU memory in total.");
  PrometheusMetric gpu_temp("mgtrain_gpu_temperature_celsius", "GPU temperature.");
  PrometheusMetric gpu_power("mgtrain_gpu_power_watts", "GPU power draw.");

  attempt.add(run, s.attempt);
  restarts.add(run, s.attempt);
  max_restarts.add(run, s.max_restarts);
  for (const RankStatus& r : s.ranks) {
    const std::string labels = run + ",rank=\"" + std::to_string(r.rank) + "\",local_rank=\"" + std::to_string(r.local_rank) + "\"";
    up.add(labels, r.state == "running" ? 1 : 0);
    if (r.heartbeat) {
      step.add(labels, static_cast<double>(r.heartbeat->step));
      if (r.heartbeat->loss) loss.add(labels, *r.heartbeat->loss);
      beat.add(labels, r.heartbeat->time);
    }
    if (r.cpu_percent) cpu.add(labels, *r.cpu_percent);
    if (r.rss_bytes) rss.add(labels, static_cast<double>(*r.rss_bytes));
  }
  for (const GpuSample& g : s.gpus) {
    const std::string labels = "gpu=\"" + std::to_string(g.index) + "\",name=\"" + prometheus_label_value(g.name) + "\"";
    if (g.utilization_percent >= 0) gpu_util.add(labels, g.utilization_percent);
    if (g.memory_used_bytes >= 0) gpu_used.add(labels, static_cast<double>(g.memory_used_bytes));
    if (g.memory_total_bytes >= 0) gpu_total.add(labels, static_cast<double>(g.memory_total_bytes));
    if (g.temperature_c >= 0) gpu_temp.add(labels, g.temperature_c);
    if (g.power_w >= 0) gpu_power.add(labels, g.power_w);
  }
  std::string out;
  for (const PrometheusMetric* m : {&attempt, &restarts, &max_restarts, &up, &step, &loss, &beat, &cpu, &rss, &gpu_util,
                                    &gpu_used, &gpu_total, &gpu_temp, &gpu_power}) {
    m->write(out);
  }
  return out;
}

std::string resources_row_json(double time, int node_rank, const std::vector<RankStatus>& ranks,
                               const std::vector<GpuSample>& gpus) {
  std::string out = "{\"kind\":\"resources\",\"time\":" + json_number(time, 15) + ",\"node_rank\":" + std::to_string(node_rank) +
                    ",\"ranks\":[";
  bool first = true;
  for (const RankStatus& r : ranks) {
    if (!r.cpu_percent || !r.rss_bytes) continue;  // not sampled (exited, or the first reading)
    out += std::string(first ? "" : ",") + "{\"rank\":" + std::to_string(r.rank) + ",\"local_rank\":" + std::to_string(r.local_rank) +
           ",\"pid\":" + std::to_string(r.pid) + ",\"cpu_percent\":" + json_number(*r.cpu_percent, 4) +
           ",\"rss_bytes\":" + std::to_string(*r.rss_bytes) + "}";
    first = false;
  }
  out += "],\"gpus\":[";
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuSample& g = gpus[i];
    auto known = [](double v) { return v < 0 ? std::string("null") : json_number(v); };
    out += std::string(i > 0 ? "," : "") + "{\"index\":" + std::to_string(g.index) + ",\"name\":" + json_quote(g.name) +
           ",\"utilization_percent\":" + known(g.utilization_percent) +
           ",\"memory_used_bytes\":" + known(static_cast<double>(g.memory_used_bytes)) +
           ",\"memory_total_bytes\":" + known(static_cast<double>(g.memory_total_bytes)) +
           ",\"temperature_c\":" + known(g.temperature_c) + ",\"power_w\":" + known(g.power_w) + "}";
  }
  out += "]}";
  return out;
}

}  // namespace mgtrain
