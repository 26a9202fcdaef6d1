// Reads a SLURM allocation from the environment (see slurm_environment.hpp and docs/slurm.md).
#include "slurm/slurm_environment.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

std::optional<int> count_of(const std::optional<SlurmValue>& value) {
  if (!value) return std::nullopt;
  auto n = parse_int(value->value);
  if (!n || *n < 0 || *n > 1'000'000) return std::nullopt;
  return static_cast<int>(*n);
}

// GPUs on this node, from the first variable that names a count: {count, variable}.
std::optional<SlurmValue> gpus_on_node(const EnvMap& env, std::vector<std::string>& notes) {
  if (auto v = slurm_variable(env, "SLURM_GPUS_ON_NODE")) {
    auto n = parse_int(*v);
    if (n && *n > 0) return SlurmValue{std::to_string(*n), "SLURM_GPUS_ON_NODE"};
  }
  if (auto v = slurm_variable(env, "SLURM_GPUS_PER_NODE")) {
    if (auto n = parse_slurm_gpu_count(*v); n && *n > 0) return SlurmValue{std::to_string(*n), "SLURM_GPUS_PER_NODE"};
    notes.push_back(fmt::format("SLURM_GPUS_PER_NODE='{}' is not a GPU count; ignored", *v));
  }
  // Lists of GPU indices: "0,1,2,3".
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    if (auto v = slurm_variable(env, name)) return SlurmValue{std::to_string(split(*v, ',').size()), name};
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> parse_slurm_gpu_count(const std::string& text) {
  // Entries "[type:]count" (also "gpu:type:count"), comma-separated; the count is the last field.
  if (trim(text).empty()) return std::nullopt;
  long long total = 0;
  for (const auto& entry : split(text, ',')) {
    const std::string e = trim(entry);
    const std::size_t colon = e.rfind(':');
    auto n = parse_int(colon == std::string::npos ? e : e.substr(colon + 1));
    if (!n || *n < 0 || *n > 65536) return std::nullopt;
    total += *n;
  }
  return static_cast<int>(total);
}

std::string describe_layout(SlurmLayout layout) {
  switch (layout) {
    case SlurmLayout::kNone:
      return "not inside a SLURM job";
    case SlurmLayout::kJobShell:
      return "job shell (sbatch script or salloc, not an srun step): this node only";
    case SlurmLayout::kLauncherPerNode:
      return "launcher per node (srun step with one task per node)";
    case SlurmLayout::kSeveralTasksPerNode:
      return "srun step with several tasks per node";
  }
  return "";
}

SlurmDetection detect_slurm(const EnvMap& env) {
  SlurmDetection d;
  auto job = slurm_first_variable(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  if (!job) return d;
  d.job_id = job->value;
  const auto job_number = parse_int(d.job_id);
  if (auto restarts = count_of(slurm_first_variable(env, {"SLURM_RESTART_COUNT"}))) d.restart_count = *restarts;
  d.run_id = SlurmValue{slurm_run_id(d.job_id), job->source};

  // A job step has SLURM_STEP_ID; the batch script has none (or, in some versions, the batch step's
  // special id 0xfffffffe, like the other special steps from 0xfffffffa up).
  auto step = slurm_first_variable(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  auto step_number = step ? parse_int(step->value) : std::nullopt;
  const bool in_step = step && !(step_number && *step_number >= 0xfffffffaLL);
  if (!in_step) {
    // The batch script or an salloc shell: runs on the allocation's first node, once.
    d.layout = SlurmLayout::kJobShell;
    auto nodes = count_of(slurm_first_variable(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}));
    if (nodes && *nodes > 1) {
      d.notes.push_back(
          fmt::format("this is the job shell of a {}-node job, not an srun step: mgtrain launch uses this node only; "
                      "start one launcher per node with `srun --ntasks-per-node=1 mgtrain launch ...`",
                      *nodes));
    }
    std::vector<std::string> gpu_notes;
    if (auto gpus = gpus_on_node(env, gpu_notes)) {
      d.nproc = gpus;
    } else if (auto tasks = slurm_first_variable(env, {"SLURM_NTASKS_PER_NODE"});
               tasks && count_of(tasks).value_or(0) > 0) {
      d.nproc = tasks;  // the job asked for N tasks per node: the launcher runs them as N workers
    } else if (auto per_node = slurm_first_variable(env, {"SLURM_TASKS_PER_NODE"})) {
      if (auto n = slurm_tasks_on_node(per_node->value, 0); n && *n > 0)
        d.nproc = SlurmValue{std::to_string(*n), per_node->source};
    }
    d.notes.insert(d.notes.end(), gpu_notes.begin(), gpu_notes.end());
    return d;
  }

  auto tasks = slurm_first_variable(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  auto nodes = slurm_first_variable(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"});
  const auto task_count = count_of(tasks), node_count = count_of(nodes);
  if (task_count && node_count && *task_count != *node_count) {
    d.layout = SlurmLayout::kSeveralTasksPerNode;
    d.problem = fmt::format(
        "this srun step runs {} tasks on {} nodes ({}, {}), but mgtrain launch must run once per node (it starts "
        "the workers itself): use `srun --ntasks={} --ntasks-per-node=1 mgtrain launch ...` (srun ignores "
        "--ntasks-per-node=1 when the job asked for more tasks), start one mgtrain-worker per rank instead "
        "(`srun mgtrain-worker CONFIG`), or set launch.slurm: off (--slurm off)",
        *task_count, *node_count, tasks->source, nodes->source, *node_count);
    return d;
  }
  d.layout = SlurmLayout::kLauncherPerNode;
  if (nodes && node_count && *node_count >= 1) d.nnodes = SlurmValue{std::to_string(*node_count), nodes->source};
  if (auto node_id = slurm_first_variable(env, {"SLURM_NODEID"}); node_id && count_of(node_id)) {
    d.node_rank = SlurmValue{std::to_string(*count_of(node_id)), node_id->source};
  }
  if (auto host = slurm_first_host(env)) d.master_addr = host;
  if (job_number && node_count.value_or(1) > 1) {
    d.master_port = SlurmValue{std::to_string(slurm_port_for_job(*job_number)), job->source};
  } else if (!job_number) {
    d.notes.push_back(fmt::format("{}='{}' is not a number: no master port derived from it", job->source, d.job_id));
  }
  if (auto gpus = gpus_on_node(env, d.notes)) {
    d.nproc = gpus;
  } else {
    d.nproc_note =
        "no GPUs in the allocation (SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE): one worker per node "
        "unless launch.nproc says otherwise (--nproc N, or --nproc cpu for one per CPU)";
  }
  return d;
}

std::vector<std::pair<std::string, SlurmValue>> slurm_detected_values(const SlurmDetection& d) {
  std::vector<std::pair<std::string, SlurmValue>> values;
  auto add = [&](const char* key, const std::optional<SlurmValue>& v) {
    if (v) values.emplace_back(std::string("launch.") + key, *v);
  };
  add("nnodes", d.nnodes);
  add("node_rank", d.node_rank);
  add("master_addr", d.master_addr);
  add("master_port", d.master_port);
  add("run_id", d.run_id);
  add("nproc", d.nproc);
  return values;
}

std::vector<DetectedSetting> slurm_launch_settings(const SlurmDetection& d) {
  std::vector<DetectedSetting> settings;
  for (const auto& [key, v] : slurm_detected_values(d)) settings.push_back({key, v.value, "SLURM (" + v.source + ")"});
  return settings;
}

std::function<std::vector<DetectedSetting>(const LoadedConfig&)> slurm_launch_detector(EnvMap env) {
  return [env = std::move(env)](const LoadedConfig& so_far) {
    std::vector<DetectedSetting> settings;
    if (so_far.config.launch.slurm == SlurmMode::Off) return settings;
    const SlurmDetection detection = detect_slurm(env);
    if (!detection.problem.empty()) throw UsageError("SLURM: " + detection.problem);
    settings = slurm_launch_settings(detection);
    // GPUs chosen by hand decide the worker count (launch_plan checks nproc against them).
    if (!so_far.is_default("launch.gpu_ids")) {
      settings.erase(
          std::remove_if(settings.begin(), settings.end(), [](const auto& s) { return s.key == "launch.nproc"; }),
          settings.end());
    }
    return settings;
  };
}

bool is_slurm_origin(const std::string& origin) { return starts_with(origin, "SLURM ("); }

std::string slurm_launch_summary(const SlurmDetection& d, const SlurmLaunchFacts& facts,
                                 const std::map<std::string, std::string>& origin) {
  // "(SLURM_NODEID)" for a detected value, "(given)" for one a source set.
  auto from = [&](const char* key, const std::optional<SlurmValue>& v) -> std::string {
    auto it = origin.find(std::string("launch.") + key);
    const bool detected = it != origin.end() && is_slurm_origin(it->second);
    if (detected && v) return v->source;
    if (it != origin.end() && it->second != LoadedConfig::kDefaultOrigin && it->second != "generated") return "given";
    return LoadedConfig::kDefaultOrigin;
  };
  auto sources = [](const std::string& a, const std::string& b) { return a == b ? a : a + ", " + b; };
  std::string text = fmt::format("SLURM job {}", d.job_id);
  if (d.restart_count > 0) text += fmt::format(" (restart {})", d.restart_count);
  if (facts.nnodes > 1) {
    text += fmt::format(": node {} of {} ({})", facts.node_rank, facts.nnodes,
                        sources(from("node_rank", d.node_rank), from("nnodes", d.nnodes)));
    text += fmt::format(", master {}:{} ({})", facts.master_addr, facts.master_port,
                        sources(from("master_addr", d.master_addr), from("master_port", d.master_port)));
  } else {
    text += ": one node";
  }
  text += fmt::format(", {} worker{} ({})", facts.nproc, facts.nproc == 1 ? "" : "s", from("nproc", d.nproc));
  text += fmt::format(", run id {} ({})", facts.run_id, from("run_id", d.run_id));
  return text;
}

RequeueDecision decide_slurm_requeue(const SlurmDetection& d, bool requeue_enabled, int node_rank,
                                     bool workers_saved_and_stopped, bool failed, bool after_sigterm,
                                     const std::optional<SlurmJobState>& job) {
  if (!d.in_job()) return {false, "not inside a SLURM job"};
  if (!requeue_enabled) return {false, "launch.slurm_requeue is off"};
  if (failed) return {false, "a worker failed"};
  if (!workers_saved_and_stopped) return {false, "the workers did not stop after saving a checkpoint"};
  if (node_rank != 0) return {false, "node 0 requeues the job"};
  if (job && starts_with(job->state, "CANCELLED")) return {false, "the job was cancelled (scancel)"};
  if (!after_sigterm) return {true, ""};
  if (!job || job->state.empty()) {
    return {false, "SIGTERM, and scontrol could not say whether the job reached its time limit"};
  }
  const bool time_limit =
      job->state == "TIMEOUT" || (job->run_time_s && job->time_limit_s && *job->run_time_s >= *job->time_limit_s);
  if (!time_limit) {
    return {false,
            "SIGTERM before the time limit (scancel, or a preemption that cancels the job); a time limit or "
            "a warning signal (#SBATCH --signal=USR1@90) requeues it"};
  }
  return {true, ""};
}

std::optional<long long> parse_slurm_duration(const std::string& text) {
  std::string t = trim(text);
  long long days = 0;
  if (auto dash = t.find('-'); dash != std::string::npos) {
    auto d = parse_int(t.substr(0, dash));
    if (!d || *d < 0) return std::nullopt;
    days = *d;
    t = t.substr(dash + 1);
  }
  auto parts = split(t, ':');
  if (parts.empty() || parts.size() > 3) return std::nullopt;
  std::vector<long long> numbers;
  for (const auto& part : parts) {
    auto n = parse_int(part);
    if (!n || *n < 0) return std::nullopt;
    numbers.push_back(*n);
  }
  long long seconds = 0;
  if (numbers.size() == 3) seconds = numbers[0] * 3600 + numbers[1] * 60 + numbers[2];  // HH:MM:SS
  if (numbers.size() == 2) seconds = numbers[0] * 60 + numbers[1];                      // MM:SS
  if (numbers.size() == 1) seconds = numbers[0] * 60;                                   // MM
  return days * 86400 + seconds;
}

SlurmJobState parse_slurm_job_state(const std::string& scontrol_output) {
  // "JobId=1 JobName=x ... JobState=COMPLETING Reason=None ... RunTime=00:01:00 TimeLimit=00:01:00 ..."
  auto field = [&](const std::string& key) -> std::string {
    const std::string wanted = key + "=";
    std::size_t at = scontrol_output.find(wanted);
    while (at != std::string::npos && at > 0 && scontrol_output[at - 1] != ' ' && scontrol_output[at - 1] != '\n') {
      at = scontrol_output.find(wanted, at + 1);
    }
    if (at == std::string::npos) return "";
    const std::size_t start = at + wanted.size();
    const std::size_t end = scontrol_output.find_first_of(" \t\n", start);
    return scontrol_output.substr(start, end == std::string::npos ? std::string::npos : end - start);
  };
  SlurmJobState job;
  job.state = field("JobState");
  job.run_time_s = parse_slurm_duration(field("RunTime"));
  job.time_limit_s = parse_slurm_duration(field("TimeLimit"));
  return job;
}

}  // namespace mgtrain
