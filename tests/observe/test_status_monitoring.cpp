// Resource monitoring and the status API's pure parts: NVML loading without NVML, /proc parsing and CPU%,
// the bearer token file, heartbeat lines, the /status JSON, the Prometheus text (checked line by line
// against the format's rules), the dashboard's curves from metrics.jsonl, resources.jsonl rows.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "host/nvml_library.hpp"
#include "host/process_stats.hpp"
#include "launch/launch_monitor.hpp"
#include "observe/resource_sampler.hpp"
#include "observe/status_snapshot.hpp"
#include "observe/status_token.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/worker_env.hpp"
#include "support/prometheus_text.hpp"
#include "support/temp_dir.hpp"
#include "worker_io/heartbeat_writer.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

class FakeGpus : public GpuStatsSource {
 public:
  std::vector<GpuSample> sample() override {
    GpuSample gpu;
    gpu.index = 0;
    gpu.name = "Fake \"GPU\" 80GB";
    gpu.uuid = "GPU-123";
    gpu.memory_used_bytes = 1LL << 30;
    gpu.memory_total_bytes = 80LL << 30;
    gpu.utilization_percent = 42;
    gpu.temperature_c = 61;
    gpu.power_w = 250.5;
    GpuSample blind;  // a GPU the driver lists but will not describe
    blind.index = 1;
    return {gpu, blind};
  }
  std::string driver_version() override { return "550.54.15"; }
};

StatusSnapshot sample_snapshot() {
  StatusSnapshot s;
  s.run_id = "run \"quoted\"\nline";
  s.run_dir = "/tmp/runs/x";
  s.hostname = "node0";
  s.attempt = 1;
  s.max_restarts = 3;
  s.phase = "running";
  s.time = 1763800000.5;
  s.start_time = 1763799000.25;
  RankStatus r0;
  r0.rank = 0;
  r0.pid = 1234;
  r0.state = "running";
  r0.heartbeat = HeartbeatInfo{120, 0.5312, 1763800000.123};
  r0.heartbeat->start_step = 100;
  r0.heartbeat->start_source = StartSource::kSnapshot;
  r0.heartbeat->snapshot_step = 100;
  r0.heartbeat->snapshot_time = 1763799990.25;  // 10.25 s before the snapshot's time
  r0.cpu_percent = 97.5;
  r0.rss_bytes = 123456789;
  r0.step_rate = 0.71;
  r0.straggler = true;
  RankStatus r1;
  r1.rank = 1;
  r1.local_rank = 1;
  r1.pid = 1235;
  r1.state = "exited";
  s.ranks = {r0, r1};
  FakeGpus gpus;
  s.gpus = gpus.sample();
  s.driver_version = "550.54.15";
  s.straggler_detection = true;
  return s;
}

}  // namespace

TEST_CASE("open_nvml gives nullptr for a library that is not NVML, or none", "[nvml]") {
  const testing::TempDir temp_dir("mgtrain-nvml-not-a-library");
  std::filesystem::path dir = temp_dir.path();
  std::ofstream(dir / "libnvidia-ml.so.1") << "this is not an ELF file\n";
  CHECK(open_nvml((dir / "libnvidia-ml.so.1").string()) == nullptr);
  CHECK(open_nvml("libc.so.6") == nullptr);  // a real shared library without NVML's symbols
  CHECK(open_nvml((dir / "missing.so").string()) == nullptr);
}

TEST_CASE("/proc stat and statm parsing, including a command name with spaces and parentheses", "[process_stats]") {
  // utime = 250 ticks, stime = 50 ticks at 100 Hz: 3 s.
  const std::string stat =
      "4242 (my (weird) worker) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 3 0 100 1000 200\n";
  REQUIRE(parse_proc_stat_cpu_seconds(stat, 100));
  CHECK(*parse_proc_stat_cpu_seconds(stat, 100) == Approx(3.0));
  CHECK_FALSE(parse_proc_stat_cpu_seconds("garbage", 100));
  CHECK_FALSE(parse_proc_stat_cpu_seconds("1 (x) S 1 2", 100));
  const std::optional<ProcStat> fields = parse_proc_stat(stat);
  REQUIRE(fields);
  CHECK(fields->state == 'S');
  CHECK(fields->parent_pid == 1);
  CHECK(fields->start_ticks == 100);
  CHECK_FALSE(parse_proc_stat("4242 (x) S 1 4242 4242 0 -1 4194560 500 0 0 0 x 50\n"));  // utime not a number
  REQUIRE(read_proc_stat(getpid()));
  CHECK(read_proc_stat(getpid())->parent_pid == getppid());
  REQUIRE(parse_proc_statm_rss_bytes("1000 300 20 1 0 50 0\n", 4096));
  CHECK(*parse_proc_statm_rss_bytes("1000 300 20 1 0 50 0\n", 4096) == 300 * 4096);
  CHECK_FALSE(parse_proc_statm_rss_bytes("1000", 4096));
}

TEST_CASE("a busy process shows CPU time and resident memory", "[process_stats]") {
  std::optional<ProcessStats> before = read_process_stats(getpid());
  REQUIRE(before);
  CHECK(before->rss_bytes > 1024 * 1024);
  // Spin until /proc shows 0.1 s more CPU time (bounded: the machine may be shared and busy).
  const auto start = std::chrono::steady_clock::now();
  volatile double sink = 0;
  std::optional<ProcessStats> after = before;
  while (after && after->cpu_seconds < before->cpu_seconds + 0.1 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    for (int i = 0; i < 100000; ++i) sink = sink + std::sqrt(sink + 1.0);
    after = read_process_stats(getpid());
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(after);
  CHECK(after->cpu_seconds >= before->cpu_seconds + 0.1);
  const double percent = cpu_percent(*before, *after, wall);
  CHECK(percent > 0);
  CHECK(percent < 150);  // one thread (ticks are coarse: some slack above 100)
  CHECK(cpu_percent(ProcessStats{1.0, 0}, ProcessStats{1.5, 0}, 2.0) == Approx(25.0));
  CHECK_FALSE(read_process_stats(-5));
  CHECK(cpu_percent(*after, *before, 1.0) == 0);  // never negative
}

TEST_CASE("the status token: 64 hex digits, a 0600 file created afresh, constant-time comparison", "[token]") {
  const std::string a = generate_status_token(), b = generate_status_token();
  CHECK(a.size() == 64);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
  const testing::TempDir temp_dir("mgtrain-token-file");
  std::filesystem::path dir = temp_dir.path();
  const std::string path = (dir / "status_token").string();
  std::ofstream(path) << "old";
  chmod(path.c_str(), 0644);
  write_status_token_file(path, a);
  struct stat info {};
  REQUIRE(stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  CHECK(read_status_token_file(path) == a);
  // A symlink planted at the path is replaced, never written through.
  std::filesystem::remove(path);
  std::filesystem::create_symlink(dir / "elsewhere", path);
  write_status_token_file(path, b);
  CHECK_FALSE(std::filesystem::exists(dir / "elsewhere"));
  CHECK(read_status_token_file(path) == b);
  CHECK(tokens_equal(a, a));
  CHECK_FALSE(tokens_equal(a, b));
  CHECK_FALSE(tokens_equal(a, a.substr(0, 63)));
  CHECK_FALSE(tokens_equal(a, a + "0"));
  CHECK_FALSE(tokens_equal(a, ""));
  CHECK_FALSE(tokens_equal("", ""));  // no token configured accepts nothing
}

TEST_CASE("heartbeat lines: written at a fixed size, read back with step, loss and time", "[heartbeat]") {
  const testing::TempDir temp_dir("mgtrain-heartbeat-line");
  std::filesystem::path dir = temp_dir.path();
  const std::string path = (dir / "heartbeat").string();
  {
    HeartbeatWriter writer(path, 0);
    writer.beat(123456789012345LL, 0.25);
    writer.beat(7);  // shorter, and without a loss: no tail of the longer line may remain
  }
  const std::string text = slurp(path);
  CHECK(text.size() == HeartbeatWriter::kLineBytes);
  CHECK(text.back() == '\n');
  std::optional<HeartbeatInfo> info = parse_heartbeat_line(text);
  REQUIRE(info);
  CHECK(info->step == 7);
  CHECK_FALSE(info->loss);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(std::abs(info->time - now) < 60);
  CHECK_FALSE(parse_heartbeat_line(""));
  CHECK_FALSE(parse_heartbeat_line("00000000000000000042\n"));  // the old format has no JSON
  std::optional<HeartbeatInfo> round =
      parse_heartbeat_line(format_heartbeat_line(HeartbeatInfo{5, 1.5, 1763800000.125}));
  REQUIRE(round);
  CHECK(round->step == 5);
  CHECK(*round->loss == 1.5);
  CHECK(round->time == Approx(1763800000.125).margin(1e-3));
}

TEST_CASE("heartbeat lines: where the run started and its newest snapshot, in the longest line that fits",
          "[heartbeat]") {
  const testing::TempDir temp_dir("mgtrain-heartbeat-start");
  const std::string path = (std::filesystem::path(temp_dir.path()) / "heartbeat").string();
  HeartbeatWriter writer(path, 0);
  writer.set_start(1234567890123, StartSource::kCheckpoint);
  writer.set_snapshot(1234567890173, 1763800000.1234567);
  writer.beat(1234567890199, 1.2345678901234567, 123456.12345678901);
  const std::string text = slurp(path);
  REQUIRE(text.size() == HeartbeatWriter::kLineBytes);
  const std::optional<HeartbeatInfo> info = parse_heartbeat_line(text);
  REQUIRE(info);  // every field in, none cut off
  CHECK(info->step == 1234567890199);
  CHECK(info->start_step == 1234567890123);
  CHECK(info->start_source == StartSource::kCheckpoint);
  CHECK(info->snapshot_step == 1234567890173);
  CHECK(*info->snapshot_time == Approx(1763800000.1234567).margin(1e-6));
  CHECK(*info->wait == Approx(123456.12345678901));
  CHECK(parse_progress_step(text) == 1234567890199);

  for (const StartSource source : {StartSource::kNone, StartSource::kCheckpoint, StartSource::kSnapshot}) {
    CHECK(parse_start_source(start_source_name(source)) == source);
  }
  HeartbeatInfo odd{5, std::nullopt, 1763800000.0};
  std::string line = format_heartbeat_line(odd);
  CHECK(line.find("from") == std::string::npos);
  CHECK(line.find("snapshot") == std::string::npos);
  line.insert(line.size() - 1, R"(,"from":"tape","snapshot":-3)");  // unknown values are unknown, not errors
  const std::optional<HeartbeatInfo> back = parse_heartbeat_line(line);
  REQUIRE(back);
  CHECK_FALSE(back->start_source);
  CHECK_FALSE(back->snapshot_step);
}

TEST_CASE("heartbeat lines: a beat the interval held back is written by flush, once", "[heartbeat]") {
  const testing::TempDir temp_dir("mgtrain-heartbeat-flush");
  const std::string path = (std::filesystem::path(temp_dir.path()) / "heartbeat").string();
  const auto step_in_file = [&] {
    std::optional<HeartbeatInfo> info = parse_heartbeat_line(slurp(path));
    REQUIRE(info);
    return info->step;
  };
  HeartbeatWriter writer(path, 3600 * 1000);  // an interval no test outlasts: only the first beat is written
  writer.beat(1, 0.5);
  writer.beat(2, 0.25);
  writer.beat(3, 0.125);
  CHECK(step_in_file() == 1);
  writer.flush();  // a worker about to block reports its newest step
  CHECK(step_in_file() == 3);
  writer.beat(4);
  writer.flush();
  writer.flush();  // nothing new held back: the file keeps step 4
  CHECK(step_in_file() == 4);
}

TEST_CASE("/status JSON: every field of the schema, escaped strings, null for unknowns", "[status]") {
  const std::string json = status_to_json(sample_snapshot());
  const nlohmann::json s = nlohmann::json::parse(json);
  CHECK(s["run_id"].get<std::string>() == "run \"quoted\"\nline");
  CHECK(s["attempt"].get<int>() == 1);
  CHECK(s["restarts"].get<int>() == 1);
  CHECK(s["max_restarts"].get<int>() == 3);
  CHECK(s["phase"].get<std::string>() == "running");
  REQUIRE(s["ranks"].size() == 2);
  CHECK(s["ranks"][0]["pid"].get<int>() == 1234);
  CHECK(s["ranks"][0]["state"].get<std::string>() == "running");
  CHECK(s["ranks"][0]["step"].get<long long>() == 120);
  CHECK(s["ranks"][0]["loss"].get<double>() == Approx(0.5312));
  CHECK(s["ranks"][0]["last_heartbeat"].get<double>() == Approx(1763800000.123).margin(1e-3));
  CHECK(s["ranks"][0]["rss_bytes"].get<long long>() == 123456789);
  CHECK(s["ranks"][1]["step"].is_null());
  CHECK(s["ranks"][1]["cpu_percent"].is_null());
  CHECK(s["straggler_detection"].get<bool>());
  CHECK(s["ranks"][0]["step_rate"].get<double>() == Approx(0.71));
  CHECK(s["ranks"][0]["straggler"].get<bool>());
  CHECK(s["ranks"][1]["step_rate"].is_null());
  CHECK_FALSE(s["ranks"][1]["straggler"].get<bool>());
  CHECK(s["ranks"][0]["start_step"].get<long long>() == 100);
  CHECK(s["ranks"][0]["resumed_from"].get<std::string>() == "snapshot");
  CHECK(s["ranks"][0]["snapshot_step"].get<long long>() == 100);
  CHECK(s["ranks"][0]["snapshot_age_s"].get<double>() == Approx(10.25));
  CHECK(s["ranks"][1]["start_step"].is_null());
  CHECK(s["ranks"][1]["resumed_from"].is_null());
  CHECK(s["ranks"][1]["snapshot_age_s"].is_null());
  REQUIRE(s["gpus"].size() == 2);
  CHECK(s["gpus"][0]["name"].get<std::string>() == "Fake \"GPU\" 80GB");
  CHECK(s["gpus"][0]["memory_total_bytes"].get<long long>() == 80LL << 30);
  CHECK(s["gpus"][1]["utilization_percent"].is_null());
  CHECK(s["driver_version"].get<std::string>() == "550.54.15");
}

TEST_CASE("/metrics follows the Prometheus text format line by line", "[status][prometheus]") {
  const std::string text = status_to_prometheus(sample_snapshot());
  std::vector<PrometheusSample> samples;
  const std::vector<std::string> problems = prometheus_text_problems(text, &samples);
  INFO(text);
  for (const std::string& problem : problems) FAIL_CHECK(problem);
  auto find = [&](const std::string& name, const std::string& rank) -> const PrometheusSample* {
    for (const PrometheusSample& s : samples) {
      if (s.name == name && (rank.empty() || (s.labels.count("rank") && s.labels.at("rank") == rank))) return &s;
    }
    return nullptr;
  };
  REQUIRE(find("mgtrain_rank_up", "0"));
  CHECK(find("mgtrain_rank_up", "0")->value == 1);
  CHECK(find("mgtrain_rank_up", "1")->value == 0);
  CHECK(find("mgtrain_rank_up", "0")->labels.at("run_id") == "run \"quoted\"\nline");  // escapes undone
  CHECK(find("mgtrain_rank_step", "0")->value == 120);
  CHECK_FALSE(find("mgtrain_rank_step", "1"));  // no heartbeat, no sample
  CHECK(find("mgtrain_restarts_total", "")->value == 1);
  REQUIRE(find("mgtrain_gpu_power_watts", ""));
  CHECK(find("mgtrain_gpu_power_watts", "")->value == 250.5);
  CHECK(find("mgtrain_rank_last_heartbeat_timestamp_seconds", "0")->value == Approx(1763800000.123).margin(1e-3));
  REQUIRE(find("mgtrain_rank_straggler", "0"));
  CHECK(find("mgtrain_rank_straggler", "0")->value == 1);
  CHECK(find("mgtrain_rank_straggler", "1")->value == 0);
  CHECK(find("mgtrain_rank_step_rate", "0")->value == Approx(0.71));
  CHECK_FALSE(find("mgtrain_rank_step_rate", "1"));  // not measured
  CHECK(find("mgtrain_rank_snapshot_step", "0")->value == 100);
  CHECK(find("mgtrain_rank_snapshot_timestamp_seconds", "0")->value == Approx(1763799990.25));
  CHECK_FALSE(find("mgtrain_rank_snapshot_step", "1"));
  StatusSnapshot off = sample_snapshot();
  off.straggler_detection = false;
  off.ranks[0].straggler = false;
  CHECK(status_to_prometheus(off).find("mgtrain_rank_straggler{") == std::string::npos);

  // The checker itself catches what it should.
  CHECK_FALSE(prometheus_text_problems("a 1").empty());                           // no final newline
  CHECK_FALSE(prometheus_text_problems("1a 1\n").empty());                        // name
  CHECK_FALSE(prometheus_text_problems("a{b=\"x\\q\"} 1\n").empty());             // escape
  CHECK_FALSE(prometheus_text_problems("a 1\nb 1\na 2\n").empty());               // not grouped
  CHECK_FALSE(prometheus_text_problems("a 1\n# TYPE a gauge\n").empty());         // TYPE late
  CHECK_FALSE(prometheus_text_problems("a{x=\"1\"} 1\na{x=\"1\"} 2\n").empty());  // repeated series
  CHECK_FALSE(prometheus_text_problems("a one\n").empty());                       // value
  CHECK(prometheus_text_problems("# HELP a x\n# TYPE a gauge\na{x=\"\\\\\\\"\\n\"} NaN 123\n").empty());
}

TEST_CASE("dashboard curves from metrics.jsonl: last row per step, torn last line ignored, thinned",
          "[status][metrics]") {
  const std::string text =
      "{\"kind\":\"train\",\"step\":10,\"loss\":0.9,\"loss_scale\":4}\n"
      "{\"kind\":\"train\",\"step\":20,\"loss\":0.8}\n"
      "not json at all\n"
      "{\"kind\":\"eval\",\"step\":20,\"eval.loss\":0.7,\"eval.accuracy\":0.5}\n"
      "{\"kind\":\"train\",\"step\":20,\"loss\":0.75,\"attempt\":1}\n"  // a restart repeats step 20
      "{\"kind\":\"train\",\"step\":30,\"lo";                           // still being written
  const nlohmann::json curves = nlohmann::json::parse(metrics_curves_json(text));
  REQUIRE(curves["train"].size() == 2);
  CHECK(curves["train"][0][0].get<int>() == 10);
  CHECK(curves["train"][0][1].get<double>() == Approx(0.9));
  CHECK(curves["train"][1][1].get<double>() == Approx(0.75));
  REQUIRE(curves["eval"].size() == 1);
  CHECK(curves["eval"][0][1].get<double>() == Approx(0.7));
  CHECK(metrics_curves_json("") == "{\"train\":[],\"eval\":[]}");

  std::string many;
  for (int step = 1; step <= 1000; ++step)
    many += "{\"kind\":\"train\",\"step\":" + std::to_string(step) + ",\"loss\":1}\n";
  const nlohmann::json thinned = nlohmann::json::parse(metrics_curves_json(many, 100));
  CHECK(thinned["train"].size() <= 101);
  CHECK(thinned["train"][thinned["train"].size() - 1][0].get<int>() == 1000);  // the last point is kept
}

TEST_CASE("the resource sampler fills CPU% and RSS of live ranks and appends resources.jsonl rows", "[resources]") {
  const testing::TempDir temp_dir("mgtrain-resources-sampler");
  std::filesystem::path dir = temp_dir.path();
  FakeGpus gpus;
  ResourceSampler sampler(&gpus, 3, (dir / "resources.jsonl").string());
  RankStatus self;
  self.rank = 6;
  self.local_rank = 0;
  self.pid = getpid();
  self.state = "running";
  RankStatus gone = self;
  gone.rank = 7;
  gone.local_rank = 1;
  gone.state = "exited";
  std::vector<RankStatus> ranks = {self, gone};
  sampler.sample(ranks, false);
  CHECK(ranks[0].rss_bytes);
  CHECK_FALSE(ranks[0].cpu_percent);  // needs two readings
  CHECK_FALSE(std::filesystem::exists(dir / "resources.jsonl"));
  sampler.sample(ranks, true);
  CHECK(ranks[0].cpu_percent);
  CHECK_FALSE(ranks[1].rss_bytes);
  const std::string text = slurp(dir / "resources.jsonl");
  REQUIRE(text.size() > 2);
  CHECK(text.back() == '\n');
  const nlohmann::json row = nlohmann::json::parse(text);
  CHECK(row["kind"].get<std::string>() == "resources");
  CHECK(row["node_rank"].get<int>() == 3);
  REQUIRE(row["ranks"].size() == 1);
  CHECK(row["ranks"][0]["rank"].get<int>() == 6);
  CHECK(row["ranks"][0]["pid"].get<int>() == getpid());
  CHECK(row["ranks"][0]["rss_bytes"].get<long long>() > 0);
  REQUIRE(row["gpus"].size() == 2);
  CHECK(row["gpus"][0]["temperature_c"].get<int>() == 61);
  CHECK(row["gpus"][1]["power_w"].is_null());
}

TEST_CASE("the GPU health line groups equal GPUs and names the driver", "[nvml]") {
  FakeGpus fake;
  std::vector<GpuSample> gpus = fake.sample();
  gpus[1] = gpus[0];
  gpus[1].index = 1;
  CHECK(gpu_health_line(gpus, "550.54.15") ==
        "mgtrain: GPUs (NVML): 2 x Fake \"GPU\" 80GB (80.0 GiB), driver 550.54.15");
  CHECK(gpu_health_line({}, "550") == "");
}

TEST_CASE("with the status server on, every worker gets a heartbeat file, and the watchdog stays off",
          "[status][env]") {
  LaunchPlan plan;
  plan.nproc = 2;
  plan.world_size = 2;
  plan.run_id = "r";
  plan.run_dir = "/logs/r";
  plan.console.assign(2, {});
  plan.status_server = true;
  EnvMap env = build_worker_environment(plan, WorkerSlot{1, 2, 1234, ""}, {});
  CHECK(env.at("MGTRAIN_HEARTBEAT_FILE") == "/logs/r/attempt_2/rank_1/heartbeat");
  CHECK(plan.hang_timeout_s == 0);  // the hang watchdog is a separate choice (launch.hang_timeout)
  plan.status_server = false;
  CHECK(build_worker_environment(plan, WorkerSlot{1, 2, 1234, ""}, {{"MGTRAIN_HEARTBEAT_FILE", "/x"}})
            .count("MGTRAIN_HEARTBEAT_FILE") == 0);
}

TEST_CASE("straggler detection runs exactly when the workers get progress files, with two ranks or more",
          "[straggler][env]") {
  LaunchPlan plan;
  plan.nproc = 4;
  plan.world_size = 4;
  plan.run_id = "r";
  plan.run_dir = "/logs/r";
  plan.console.assign(4, {});
  LaunchConfig launch;
  for (const double timeout : {0.0, 30.0}) {
    for (const bool server : {false, true}) {
      CAPTURE(timeout, server);
      plan.hang_timeout_s = timeout;
      plan.status_server = server;
      const bool files = build_worker_environment(plan, WorkerSlot{1, 0, 1234, ""}, {}).count("MGTRAIN_HEARTBEAT_FILE");
      CHECK(straggler_settings(plan, launch).has_value() == files);
    }
  }
  launch.straggler_margin = 0.3;
  launch.straggler_window = 12;
  const std::optional<StragglerSettings> settings = straggler_settings(plan, launch);
  REQUIRE(settings);
  CHECK(settings->margin == 0.3);
  CHECK(settings->window_s == 12);
  launch.straggler_detection = false;
  CHECK_FALSE(straggler_settings(plan, launch));
  launch.straggler_detection = true;
  plan.nproc = 1;
  CHECK_FALSE(straggler_settings(plan, launch));  // no one to compare with
}

TEST_CASE("the job's host exposes its newest recovery in /status and /metrics", "[status]") {
  StatusSnapshot snapshot;
  snapshot.run_id = "job";
  snapshot.hostname = "hostA";
  snapshot.job_wide = true;
  snapshot.nodes = 2;
  CHECK_THAT(status_to_json(snapshot),
             Catch::Contains("\"last_recovery\":null") && Catch::Contains("\"scope\":\"job\""));
  CHECK_THAT(status_to_prometheus(snapshot), !Catch::Contains("mgtrain_recovery"));
  RoundEntry::Recovery recovery;
  recovery.fault = 1795991863.2;
  recovery.detected_s = 0.25;
  recovery.stopped_s = 1.5;
  recovery.rendezvous_s = 1.75;
  recovery.first_step_s = 4.5;
  recovery.steps_lost = 37;
  recovery.resumed_from = StartSource::kSnapshot;
  snapshot.last_recovery = recovery;
  snapshot.last_recovery_round = 3;
  const std::string json = status_to_json(snapshot);
  CHECK_THAT(json, Catch::Contains("\"last_recovery\":{\"round\":3,") && Catch::Contains("\"first_step_s\":4.5") &&
                       Catch::Contains("\"steps_lost\":37") && Catch::Contains("\"resumed_from\":\"snapshot\""));
  const std::string metrics = status_to_prometheus(snapshot);
  CHECK_THAT(metrics, Catch::Contains("mgtrain_recovery_seconds{run_id=\"job\",phase=\"detected\"} 0.25\n") &&
                          Catch::Contains("mgtrain_recovery_seconds{run_id=\"job\",phase=\"first_step\"} 4.5\n") &&
                          Catch::Contains("mgtrain_recovery_steps_lost{run_id=\"job\"} 37\n") &&
                          Catch::Contains("mgtrain_recovery_round{run_id=\"job\"} 3\n"));
  std::vector<PrometheusSample> samples;
  CHECK(prometheus_text_problems(metrics, &samples).empty());
}
