// Renders the status snapshot as JSON and Prometheus text, and reads/writes heartbeat lines (see status_snapshot.hpp).
#include "observe/status_snapshot.hpp"
#include "util/json_text.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include <nlohmann/json.hpp>

#include "observe/metrics_reader.hpp"

namespace mgtrain {
namespace {

using Json = nlohmann::ordered_json;

// `value` to `significant_digits` digits (compact output: nlohmann writes the shortest text that reads back
// exactly), or null when it is not finite.
Json rounded(double value, int significant_digits = 15) {
  if (!std::isfinite(value)) return nullptr;
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*g", significant_digits, value);
  return std::strtod(buffer, nullptr);
}

Json rounded(const std::optional<double>& value) { return value ? rounded(*value) : Json(nullptr); }

// A GPU reading: negative means unknown (null); counts stay integers.
Json known(double value) { return value < 0 ? Json(nullptr) : rounded(value); }
Json known(std::int64_t value) { return value < 0 ? Json(nullptr) : Json(value); }
Json known(int value) { return value < 0 ? Json(nullptr) : Json(value); }

Json curve_json(const std::vector<MetricPoint>& points, std::size_t max_points) {
  Json out = Json::array();
  const std::size_t n = points.size();
  const std::size_t stride = max_points == 0 || n <= max_points ? 1 : (n + max_points - 1) / max_points;
  for (std::size_t index = 0; index < n; ++index) {
    if (index % stride != 0 && index + 1 != n) continue;  // thinned evenly, the last point kept
    out.push_back(Json::array({Json(points[index].step), rounded(points[index].value, 8)}));
  }
  return out;
}

// The fields a GPU has in both the /status JSON and a resources.jsonl row (uuid only in /status).
Json gpu_json(const GpuSample& gpu, bool with_uuid) {
  Json out = Json::object();
  out["index"] = gpu.index;
  out["name"] = gpu.name;
  if (with_uuid) out["uuid"] = gpu.uuid;
  out["utilization_percent"] = known(gpu.utilization_percent);
  out["memory_used_bytes"] = known(gpu.memory_used_bytes);
  out["memory_total_bytes"] = known(gpu.memory_total_bytes);
  out["temperature_c"] = known(gpu.temperature_c);
  out["power_w"] = known(gpu.power_w);
  return out;
}

// The fields a rank starts with in both the /status JSON and a resources.jsonl row.
Json rank_json(const RankStatus& r) {
  Json out = Json::object();
  out["rank"] = r.rank;
  out["local_rank"] = r.local_rank;
  out["pid"] = r.pid;
  return out;
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

// The metrics of one exposition, written in the order they were added.
class PrometheusExposition {
 public:
  PrometheusMetric& add(std::string name, std::string help, std::string type = "gauge") {
    return metrics_.emplace_back(std::move(name), std::move(help), std::move(type));
  }
  std::string text() const {
    std::string out;
    for (const PrometheusMetric& metric : metrics_) metric.write(out);
    return out;
  }

 private:
  std::deque<PrometheusMetric> metrics_;  // a deque: the references add() gave stay valid
};

}  // namespace

std::string metrics_curves_json(std::string_view text, std::size_t max_points) {
  MetricsLog log;  // complete lines only; the last row per (kind, step) wins
  log.add_lines(text);
  Json out = Json::object();
  out["train"] = curve_json(log.series("loss"), max_points);
  out["eval"] = curve_json(log.series("eval.loss"), max_points);
  return json_text(out);
}

std::string status_to_json(const StatusSnapshot& s) {
  Json out = Json::object();
  out["run_id"] = s.run_id;
  out["run_dir"] = s.run_dir;
  out["hostname"] = s.hostname;
  out["node_rank"] = s.node_rank;
  out["phase"] = s.phase;
  out["attempt"] = s.attempt;
  out["restarts"] = s.attempt;
  out["max_restarts"] = s.max_restarts;
  out["start_time"] = rounded(s.start_time);
  out["time"] = rounded(s.time);
  Json ranks = Json::array();
  out["scope"] = s.job_wide ? "job" : "node";
  out["nodes"] = s.nodes;
  if (!s.job_status_host.empty()) out["job_status_host"] = s.job_status_host;
  if (s.job_wide) {
    Json recovery = nullptr;
    if (s.last_recovery) {
      recovery = Json::object();
      recovery["round"] = s.last_recovery_round;
      const Json fields = Json::parse(recovery_to_json(*s.last_recovery));
      for (const auto& [key, value] : fields.items()) recovery[key] = value;
    }
    out["last_recovery"] = std::move(recovery);
    // Each node's snapshot replication; ages from this snapshot's time, in milliseconds.
    const auto age = [&](double time) { return Json(std::round(std::max(0.0, s.time - time) * 1000) / 1000); };
    Json replication = Json::array();
    for (const NodeReplication& node : s.replication) {
      Json entry = Json::object();
      entry["node_rank"] = node.node_rank;
      entry["host"] = node.host;
      entry["buddy"] = node.buddy.empty() ? Json(nullptr) : Json(node.buddy);
      entry["connected"] = node.connected;
      entry["sent"] = node.sent;
      entry["skipped"] = node.skipped;
      entry["bytes_sent"] = node.bytes_sent;
      entry["sent_step"] = node.sent_step ? Json(*node.sent_step) : Json(nullptr);
      entry["sent_age_s"] = node.sent_time ? age(*node.sent_time) : Json(nullptr);
      entry["received"] = node.received;
      Json held = Json::array();
      for (const NodeReplication::Held& h : node.held)
        held.push_back({{"rank", h.rank}, {"step", h.step}, {"age_s", age(h.time)}});
      entry["held"] = std::move(held);
      replication.push_back(std::move(entry));
    }
    out["replication"] = std::move(replication);
  }
  for (const RankStatus& r : s.ranks) {
    Json rank = rank_json(r);
    rank["host"] = r.host.empty() ? s.hostname : r.host;
    rank["node_rank"] = r.node_rank < 0 ? s.node_rank : r.node_rank;
    rank["state"] = r.state;
    rank["step"] = r.heartbeat ? Json(r.heartbeat->step) : Json(nullptr);
    rank["loss"] = r.heartbeat ? rounded(r.heartbeat->loss) : Json(nullptr);
    rank["last_heartbeat"] = r.heartbeat ? rounded(r.heartbeat->time) : Json(nullptr);
    rank["cpu_percent"] = rounded(r.cpu_percent);
    rank["rss_bytes"] = r.rss_bytes ? Json(*r.rss_bytes) : Json(nullptr);
    rank["step_rate"] = r.step_rate ? rounded(*r.step_rate, 6) : Json(nullptr);
    rank["straggler"] = r.straggler;
    // Where the rank's run started, and its newest snapshot in memory (docs/checkpoints.md#snapshots-in-memory).
    const std::optional<HeartbeatInfo>& beat = r.heartbeat;
    rank["start_step"] = beat && beat->start_step ? Json(*beat->start_step) : Json(nullptr);
    rank["resumed_from"] = beat && beat->start_source ? Json(start_source_name(*beat->start_source)) : Json(nullptr);
    rank["snapshot_step"] = beat && beat->snapshot_step ? Json(*beat->snapshot_step) : Json(nullptr);
    rank["snapshot_age_s"] = beat && beat->snapshot_time  // in milliseconds
                                 ? Json(std::round(std::max(0.0, s.time - *beat->snapshot_time) * 1000) / 1000)
                                 : Json(nullptr);
    ranks.push_back(std::move(rank));
  }
  out["straggler_detection"] = s.straggler_detection;
  out["ranks"] = std::move(ranks);
  Json gpus = Json::array();
  for (const GpuSample& gpu : s.gpus) gpus.push_back(gpu_json(gpu, true));
  out["gpus"] = std::move(gpus);
  out["driver_version"] = s.driver_version.empty() ? Json(nullptr) : Json(s.driver_version);
  return json_text(out);
}

std::string prometheus_label_value(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string status_to_prometheus(const StatusSnapshot& s) {
  const std::string run = "run_id=\"" + prometheus_label_value(s.run_id) + "\"";
  PrometheusExposition metrics;
  PrometheusMetric& attempt = metrics.add("mgtrain_attempt", "Current attempt of the worker group (0 = first start).");
  PrometheusMetric& restarts = metrics.add("mgtrain_restarts_total", "Restarts of the worker group so far.", "counter");
  PrometheusMetric& max_restarts = metrics.add("mgtrain_max_restarts", "Restarts allowed (launch.max_restarts).");
  PrometheusMetric& up = metrics.add("mgtrain_rank_up", "1 while the rank's worker process runs, else 0.");
  PrometheusMetric& step = metrics.add("mgtrain_rank_step", "Last training step the rank reported in its heartbeat.");
  PrometheusMetric& loss = metrics.add("mgtrain_rank_loss", "Training loss of the rank's last heartbeat.");
  PrometheusMetric& beat =
      metrics.add("mgtrain_rank_last_heartbeat_timestamp_seconds", "Unix time of the rank's last heartbeat.");
  PrometheusMetric& cpu =
      metrics.add("mgtrain_rank_cpu_percent", "CPU use of the rank's worker process (100 = one core).");
  PrometheusMetric& rss =
      metrics.add("mgtrain_rank_resident_memory_bytes", "Resident memory of the rank's worker process.");
  PrometheusMetric& step_rate = metrics.add(
      "mgtrain_rank_step_rate", "Steps per second of the rank over the straggler window (launch.straggler_window).");
  PrometheusMetric& snapshot_step =
      metrics.add("mgtrain_rank_snapshot_step", "Step of the rank's newest snapshot in memory.");
  PrometheusMetric& snapshot_time = metrics.add("mgtrain_rank_snapshot_timestamp_seconds",
                                                "Unix time the rank's newest snapshot in memory was completed.");
  PrometheusMetric& straggler = metrics.add(
      "mgtrain_rank_straggler", "1 while the rank is flagged as a straggler (slower than the other ranks' median).");
  PrometheusMetric& gpu_util =
      metrics.add("mgtrain_gpu_utilization_percent", "GPU busy time over the driver's sample period.");
  PrometheusMetric& gpu_used = metrics.add("mgtrain_gpu_memory_used_bytes", "GPU memory in use.");
  PrometheusMetric& gpu_total = metrics.add("mgtrain_gpu_memory_total_bytes", "GPU memory in total.");
  PrometheusMetric& gpu_temp = metrics.add("mgtrain_gpu_temperature_celsius", "GPU temperature.");
  PrometheusMetric& gpu_power = metrics.add("mgtrain_gpu_power_watts", "GPU power draw.");

  attempt.add(run, s.attempt);
  restarts.add(run, s.attempt);
  max_restarts.add(run, s.max_restarts);
  for (const RankStatus& r : s.ranks) {
    std::string labels =
        run + ",rank=\"" + std::to_string(r.rank) + "\",local_rank=\"" + std::to_string(r.local_rank) + "\"";
    if (s.job_wide) {  // every node's ranks: which node each series is of
      labels += ",host=\"" + prometheus_label_value(r.host.empty() ? s.hostname : r.host) + "\",node_rank=\"" +
                std::to_string(r.node_rank < 0 ? s.node_rank : r.node_rank) + "\"";
    }
    up.add(labels, r.state == "running" ? 1 : 0);
    if (r.heartbeat) {
      step.add(labels, static_cast<double>(r.heartbeat->step));
      if (r.heartbeat->loss) loss.add(labels, *r.heartbeat->loss);
      beat.add(labels, r.heartbeat->time);
    }
    if (r.cpu_percent) cpu.add(labels, *r.cpu_percent);
    if (r.rss_bytes) rss.add(labels, static_cast<double>(*r.rss_bytes));
    if (r.step_rate) step_rate.add(labels, *r.step_rate);
    if (r.heartbeat && r.heartbeat->snapshot_step && r.heartbeat->snapshot_time) {
      snapshot_step.add(labels, static_cast<double>(*r.heartbeat->snapshot_step));
      snapshot_time.add(labels, *r.heartbeat->snapshot_time);
    }
    if (s.straggler_detection) straggler.add(labels, r.straggler ? 1 : 0);
  }
  if (s.last_recovery) {
    const RoundEntry::Recovery& r = *s.last_recovery;
    PrometheusMetric& phase = metrics.add(
        "mgtrain_recovery_seconds",
        "The newest recovery (restart or regroup), seconds from the fault to each phase: detected, workers stopped, "
        "rendezvous complete, first step.");
    const std::pair<const char*, const std::optional<double>*> phases[] = {{"detected", &r.detected_s},
                                                                           {"stopped", &r.stopped_s},
                                                                           {"rendezvous", &r.rendezvous_s},
                                                                           {"first_step", &r.first_step_s}};
    for (const auto& [name, value] : phases) {
      if (*value) phase.add(run + ",phase=\"" + name + "\"", **value);
    }
    if (r.steps_lost) {
      metrics.add("mgtrain_recovery_steps_lost", "Steps the newest recovery lost (last step reached - resumed step).")
          .add(run, static_cast<double>(*r.steps_lost));
    }
    metrics.add("mgtrain_recovery_round", "The round whose end the newest recovery followed.")
        .add(run, s.last_recovery_round);
  }
  for (const GpuSample& g : s.gpus) {
    const std::string labels =
        "gpu=\"" + std::to_string(g.index) + "\",name=\"" + prometheus_label_value(g.name) + "\"";
    if (g.utilization_percent >= 0) gpu_util.add(labels, g.utilization_percent);
    if (g.memory_used_bytes >= 0) gpu_used.add(labels, static_cast<double>(g.memory_used_bytes));
    if (g.memory_total_bytes >= 0) gpu_total.add(labels, static_cast<double>(g.memory_total_bytes));
    if (g.temperature_c >= 0) gpu_temp.add(labels, g.temperature_c);
    if (g.power_w >= 0) gpu_power.add(labels, g.power_w);
  }
  return metrics.text();
}

std::string resources_row_json(double time, int node_rank, const std::vector<RankStatus>& ranks,
                               const std::vector<GpuSample>& gpus) {
  Json out = Json::object();
  out["kind"] = "resources";
  out["time"] = rounded(time);
  out["node_rank"] = node_rank;
  Json sampled = Json::array();
  for (const RankStatus& r : ranks) {
    if (!r.cpu_percent || !r.rss_bytes) continue;  // not sampled (exited, or the first reading)
    Json rank = rank_json(r);
    rank["cpu_percent"] = rounded(*r.cpu_percent, 4);
    rank["rss_bytes"] = *r.rss_bytes;
    sampled.push_back(std::move(rank));
  }
  out["ranks"] = std::move(sampled);
  Json gpu_rows = Json::array();
  for (const GpuSample& gpu : gpus) gpu_rows.push_back(gpu_json(gpu, false));
  out["gpus"] = std::move(gpu_rows);
  return json_text(out);
}

}  // namespace mgtrain
