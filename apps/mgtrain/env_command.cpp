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
#include "core/build_info.hpp"
#include "core/config_loader.hpp"
#include "core/error.hpp"
#include "core/run_capture.hpp"
#include "core/worker_binary.hpp"

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
    worker_path = find_worker_binary(current_environment().count("MGTRAIN_LAUNCH_WORKER") ? current_environment().at("MGTRAIN_LAUNCH_WORKER") : "");
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

}  // namespace

int run_env_command(const EnvRequest& request) {
  char hostname[256] = {0};
  gethostname(hostname, sizeof hostname - 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  int usable_cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  long online_cores = sysconf(_SC_NPROCESSORS_ONLN);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string probe_problem, worker_path;
  YAML::Node probe = probe_worker(probe_problem, worker_path);
  auto interfaces = network_interfaces();

  YAML::Emitter out;
  if (request.json) {
    out.SetMapFormat(YAML::Flow);
    out.SetSeqFormat(YAML::Flow);
    out << YAML::DoubleQuoted;
  }
  out << YAML::BeginMap;
  out << YAML::Key << "mgtrain" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << build_info::kVersion;
  out << YAML::Key << "build_type" << YAML::Value << build_info::kBuildType;
  out << YAML::Key << "compiler" << YAML::Value << build_info::kCompiler;
  out << YAML::Key << "worker" << YAML::Value << (worker_path.empty() ? "not found" : worker_path);
  out << YAML::EndMap;
  out << YAML::Key << "torch" << YAML::Value;
  if (probe) {
    YAML::Node facts = YAML::Clone(probe);
    facts.SetStyle(request.json ? YAML::EmitterStyle::Flow : YAML::EmitterStyle::Block);
    out << facts;
  } else {
    out << YAML::BeginMap << YAML::Key << "error" << YAML::Value << probe_problem << YAML::EndMap;
  }
  out << YAML::Key << "machine" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "hostname" << YAML::Value << hostname;
  out << YAML::Key << "cpu_cores_online" << YAML::Value << online_cores;
  out << YAML::Key << "cpu_cores_usable" << YAML::Value << usable_cores;
  out << YAML::Key << "CUDA_VISIBLE_DEVICES" << YAML::Value << (visible ? visible : "(unset)");
  out << YAML::Key << "network_interfaces" << YAML::Value << YAML::BeginSeq;
  for (const auto& i : interfaces) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << i.name << YAML::Key << "family"
        << YAML::Value << i.family << YAML::Key << "address" << YAML::Value << i.address << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  std::printf("%s\n", out.c_str());
  if (!request.json && !probe) std::fprintf(stderr, "mgtrain: warning: no torch facts: %s\n", probe_problem.c_str());
  return exit_code::kSuccess;
}

}  // namespace mgtrain
