// The SLURM rules worker and launcher share (see slurm_task.hpp).
#include "contract/slurm_task.hpp"

#include <fmt/format.h>

#include "contract/hostlist.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {

std::optional<std::string> slurm_variable(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || trim(it->second).empty()) return std::nullopt;
  return trim(it->second);
}

std::optional<SlurmValue> slurm_first_variable(const EnvMap& env, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto value = slurm_variable(env, name)) return SlurmValue{*value, name};
  return std::nullopt;
}

int slurm_port_for_job(long long job_id) { return 20000 + static_cast<int>((job_id < 0 ? -job_id : job_id) % 20000); }

std::string slurm_run_id(const std::string& job_id) { return "slurm-" + job_id; }

std::optional<SlurmValue> slurm_first_host(const EnvMap& env) {
  auto list = slurm_first_variable(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!list) return std::nullopt;
  std::vector<std::string> hosts;
  try {
    hosts = expand_hostlist(list->value);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("environment: {}: {}", list->source, e.what()));
  }
  return SlurmValue{hosts.front(), list->source};
}

std::optional<int> slurm_tasks_on_node(const std::string& tasks_per_node, int node_index) {
  // "2(x3),1": nodes 0-2 run 2 tasks, node 3 runs 1.
  if (node_index < 0 || trim(tasks_per_node).empty()) return std::nullopt;
  int node = 0;
  for (const auto& entry : split(tasks_per_node, ',')) {
    const std::string e = trim(entry);
    const std::size_t paren = e.find("(x");
    auto tasks = parse_int(e.substr(0, paren));
    std::optional<std::int64_t> repeat = 1;
    if (paren != std::string::npos) {
      if (e.back() != ')') return std::nullopt;
      repeat = parse_int(e.substr(paren + 2, e.size() - paren - 3));
    }
    if (!tasks || !repeat || *tasks < 0 || *repeat < 1) return std::nullopt;
    if (node_index < node + *repeat) return static_cast<int>(*tasks);
    node += static_cast<int>(*repeat);
  }
  return std::nullopt;
}

}  // namespace mgtrain
