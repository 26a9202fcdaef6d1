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

#include "commands.hpp"
#include "util/build_info.hpp"
#include "config/config_loader.hpp"
#include "util/error.hpp"
#include "util/json_writer.hpp"
#include "util/value_parsing.hpp"
#include "util/run_capture.hpp"
#include "slurm/slurm_environment.hpp"
#include "util/worker_binary.hpp"

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

// The worker's JSON probe, or a Null node with `problem` set.
YAML::Node probe_worker(std::string& problem, std::string& worker_path) {
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
      return YAML::Load(run.out);
    }
  } catch (const Error& e) {
    problem = e.what();
  } catch (const YAML::Exception& e) {
    problem = std::string("worker probe printed malformed JSON: ") + e.what();
  }
  return YAML::Node();
}

// What `mgtrain launch` would take from a SLURM allocation, each value with its variable (docs/slurm.md).
YAML::Node slurm_facts(const SlurmDetection& detection) {
  YAML::Node slurm;
  slurm["layout"] = describe_layout(detection.layout);
  if (!detection.in_job()) return slurm;
  slurm["job_id"] = detection.job_id;
  slurm["restart_count"] = detection.restart_count;
  YAML::Node detected(YAML::NodeType::Map);
  for (const auto& [key, value] : slurm_detected_values(detection)) {
    YAML::Node entry;
    entry["value"] = value.value;
    entry["from"] = value.source;
    entry.SetStyle(YAML::EmitterStyle::Flow);
    detected[key] = entry;
  }
  slurm["launch_settings"] = detected;
  YAML::Node notes(YAML::NodeType::Sequence);
  for (const auto& note : detection.notes) notes.push_back(note);
  if (!detection.nproc_note.empty()) notes.push_back(detection.nproc_note);
  if (notes.size() > 0) slurm["notes"] = notes;
  if (!detection.problem.empty()) slurm["problem"] = detection.problem;
  return slurm;
}

}  // namespace

// JSON text of a YAML tree: booleans, numbers and null stay unquoted, everything else is a string.
std::string to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    std::string out = "{";
    for (auto it = node.begin(); it != node.end(); ++it)
      out += (out.size() > 1 ? ", " : "") + json_quote(it->first.Scalar()) + ": " + to_json(it->second);
    return out + "}";
  }
  if (node.IsSequence()) {
    std::string out = "[";
    for (const auto& item : node) out += (out.size() > 1 ? ", " : "") + to_json(item);
    return out + "]";
  }
  if (!node.IsDefined() || node.IsNull()) return "null";
  const std::string& text = node.Scalar();
  if (text == "true" || text == "false") return text;
  if (node.Tag() != "!" && parse_number(text) && text.find_first_not_of("-0123456789.e") == std::string::npos) return text;
  return json_quote(text);
}

int run_env_command(const EnvRequest& request) {
  char hostname[256] = {0};
  gethostname(hostname, sizeof hostname - 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  const int usable_cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string probe_problem, worker_path;
  YAML::Node probe = probe_worker(probe_problem, worker_path);

  YAML::Node facts;
  facts["mgtrain"]["version"] = build_info::kVersion;
  facts["mgtrain"]["build_type"] = build_info::kBuildType;
  facts["mgtrain"]["compiler"] = build_info::kCompiler;
  facts["mgtrain"]["worker"] = worker_path.empty() ? "not found" : worker_path;
  if (probe) {
    facts["torch"] = probe;
    facts["torch"].SetStyle(YAML::EmitterStyle::Block);
  } else {
    facts["torch"]["error"] = probe_problem;
  }
  facts["machine"]["hostname"] = hostname;
  facts["machine"]["cpu_cores_online"] = sysconf(_SC_NPROCESSORS_ONLN);
  facts["machine"]["cpu_cores_usable"] = usable_cores;
  if (visible) {
    facts["machine"]["CUDA_VISIBLE_DEVICES"] = visible;
  } else {
    facts["machine"]["CUDA_VISIBLE_DEVICES"] = YAML::Node(YAML::NodeType::Null);
  }
  YAML::Node interfaces(YAML::NodeType::Sequence);
  for (const auto& i : network_interfaces()) {
    YAML::Node entry;
    entry["name"] = i.name;
    entry["family"] = i.family;
    entry["address"] = i.address;
    entry.SetStyle(YAML::EmitterStyle::Flow);
    interfaces.push_back(entry);
  }
  facts["machine"]["network_interfaces"] = interfaces;
  try {
    facts["slurm"] = slurm_facts(detect_slurm(current_environment()));
  } catch (const Error& e) {  // a malformed node list
    facts["slurm"]["error"] = e.what();
  }

  if (request.json) {
    std::printf("%s\n", to_json(facts).c_str());
  } else {
    YAML::Emitter out;
    out << facts;
    std::printf("%s\n", out.c_str());
    if (!probe) std::fprintf(stderr, "mgtrain: warning: no torch facts: %s\n", probe_problem.c_str());
  }
  return exit_code::kSuccess;
}

}  // namespace mgtrain
