// `mgtrain env`: what this machine offers a training job. Torch facts come from `mgtrain-worker --probe`
// so the launcher itself stays free of LibTorch.
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "config/config_loader.hpp"
#include "contract/worker_binary.hpp"
#include "launch/python_interpreter.hpp"
#include "process/run_capture.hpp"
#include "slurm/slurm_environment.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"
#include "util/json_text.hpp"
#include "util/log.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

struct Interface {
  std::string name, family, address;
};

std::vector<Interface> network_interfaces() {
  std::vector<Interface> result;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return result;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
    char host[NI_MAXHOST];
    socklen_t len = a->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (getnameinfo(a->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) continue;
    result.push_back({a->ifa_name, a->ifa_addr->sa_family == AF_INET ? "ipv4" : "ipv6", host});
  }
  freeifaddrs(list);
  return result;
}

using Json = nlohmann::ordered_json;

// The worker's JSON probe, or null with `problem` set.
Json probe_worker(std::string& problem, std::string& worker_path) {
  try {
    const EnvMap env = current_environment();
    const auto configured = env.find("MGTRAIN_LAUNCH_WORKER");
    worker_path = find_worker_binary(configured == env.end() ? "" : configured->second);
    CaptureOptions options;
    options.timeout_s = 30.0;
    CapturedRun run = run_and_capture({worker_path, "--probe"}, options);
    if (run.timed_out) {
      problem = "worker probe timed out after 30 s";
    } else if (run.exit_code != 0) {
      problem = fmt::format("worker probe exited with code {}", run.exit_code);
    } else {
      return Json::parse(run.out);
    }
  } catch (const Error& e) {
    problem = e.what();
  } catch (const Json::exception& e) {
    problem = std::string("worker probe printed malformed JSON: ") + e.what();
  }
  return nullptr;
}

// A detected setting's text as JSON: an integer or a number when it reads as one ("55", "20055"), else a string.
Json setting_value(const std::string& text) {
  if (text.find_first_not_of("-0123456789.e") == std::string::npos) {
    if (const auto integer = parse_int(text)) return *integer;
    if (const auto number = parse_number(text)) return *number;
  }
  return text;
}

// What `mgtrain launch` would take from a SLURM allocation, each value with its variable (docs/slurm.md).
Json slurm_facts(const SlurmDetection& detection) {
  Json slurm = Json::object();
  slurm["layout"] = describe_layout(detection.layout);
  if (!detection.in_job()) return slurm;
  slurm["job_id"] = setting_value(detection.job_id);
  slurm["restart_count"] = detection.restart_count;
  Json detected = Json::object();
  for (const auto& [key, value] : slurm_detected_values(detection)) {
    detected[key] = Json::object({{"value", setting_value(value.value)}, {"from", value.source}});
  }
  slurm["launch_settings"] = std::move(detected);
  Json notes = detection.notes;
  if (!detection.nproc_note.empty()) notes.push_back(detection.nproc_note);
  if (!notes.empty()) slurm["notes"] = std::move(notes);
  if (!detection.problem.empty()) slurm["problem"] = detection.problem;
  return slurm;
}

// The facts as a YAML tree for people: one item per line down to the third level (an interface, a detected
// setting), which stays on one line, as does everything inside the worker's probe (`flow_depth` 2 for it).
YAML::Node to_yaml(const Json& json, int depth = 0, int flow_depth = 3) {
  if (json.is_object() || json.is_array()) {
    YAML::Node node(json.is_object() ? YAML::NodeType::Map : YAML::NodeType::Sequence);
    for (const auto& [key, value] : json.items()) {
      const int inner_flow_depth = depth == 0 && key == "torch" ? 2 : flow_depth;
      if (json.is_object())
        node[key] = to_yaml(value, depth + 1, inner_flow_depth);
      else
        node.push_back(to_yaml(value, depth + 1, flow_depth));
    }
    if (depth >= flow_depth) node.SetStyle(YAML::EmitterStyle::Flow);
    return node;
  }
  if (json.is_null()) return YAML::Node(YAML::NodeType::Null);
  if (json.is_string()) return YAML::Node(json.get<std::string>());
  return YAML::Node(json.dump());
}

// What train.device auto does here when the probe's facts alone leave it unsaid: a CUDA LibTorch without a visible
// GPU trains on the CPU (the worker says nothing about it per run). "" otherwise.
std::string device_auto_note(const Json& probe) {
  if (!probe.is_object() || probe.value("built_with_cuda", false) != true || probe.value("cuda_available", true))
    return "";
  return "train.device auto trains on the CPU with gloo here: this LibTorch has CUDA but no GPU is visible";
}

}  // namespace

int run_env_command(const EnvRequest& request) {
  char hostname[256] = {0};
  gethostname(hostname, sizeof hostname - 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  const int usable_cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string probe_problem, worker_path;
  const Json probe = probe_worker(probe_problem, worker_path);

  Json facts = Json::object();
  facts["mgtrain"] = Json::object({{"version", build_info::kVersion},
                                   {"build_type", build_info::kBuildType},
                                   {"compiler", build_info::kCompiler},
                                   {"worker", worker_path.empty() ? "not found" : worker_path}});
  // The interpreter `mgtrain launch train.py` would use (no config file here: launch.python from
  // MGTRAIN_LAUNCH_PYTHON).
  const EnvMap environment = current_environment();
  const auto configured = environment.find("MGTRAIN_LAUNCH_PYTHON");
  const PythonInterpreter python =
      choose_python(configured == environment.end() ? "" : configured->second, "MGTRAIN_LAUNCH_PYTHON", environment);
  facts["python"] = Json::object({{"command", python.command},
                                  {"path", python.path.empty() ? Json(nullptr) : Json(python.path)},
                                  {"chosen_by", python.source}});
  facts["torch"] = probe.is_null() ? Json::object({{"error", probe_problem}}) : probe;
  if (const std::string note = device_auto_note(probe); !note.empty()) facts["torch"]["note"] = note;
  Json machine = Json::object();
  machine["hostname"] = hostname;
  machine["cpu_cores_online"] = sysconf(_SC_NPROCESSORS_ONLN);
  machine["cpu_cores_usable"] = usable_cores;
  machine["CUDA_VISIBLE_DEVICES"] = visible ? Json(visible) : Json(nullptr);
  Json interfaces = Json::array();
  for (const auto& i : network_interfaces()) {
    interfaces.push_back(Json::object({{"name", i.name}, {"family", i.family}, {"address", i.address}}));
  }
  machine["network_interfaces"] = std::move(interfaces);
  facts["machine"] = std::move(machine);
  Json pet = Json::object();  // torchrun's PET_* variables: what `mgtrain launch` takes from them
  for (const auto& variable : describe_torchrun_variables(current_environment())) {
    pet[variable.name] = Json::object({{"value", variable.value}, {"effect", variable.effect}});
  }
  facts["torchrun_variables"] = std::move(pet);
  try {
    facts["slurm"] = slurm_facts(detect_slurm(current_environment()));
  } catch (const Error& e) {  // a malformed node list
    facts["slurm"] = Json::object({{"error", e.what()}});
  }

  if (request.json) {
    std::printf("%s\n", json_text(facts, 2).c_str());
  } else {
    YAML::Emitter out;
    out << to_yaml(facts);
    std::printf("%s\n", out.c_str());
    if (probe.is_null()) log::warn("no torch facts: {}", probe_problem);
  }
  return exit_code::kSuccess;
}

}  // namespace mgtrain
