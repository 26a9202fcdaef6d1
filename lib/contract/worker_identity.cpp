// Reads the worker's rank and store address from the environment (see worker_identity.hpp).
#include "contract/worker_identity.hpp"

#include <fmt/format.h>

#include "contract/slurm_task.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

int int_variable(const EnvMap& env, const std::string& name, int min_value) {
  auto it = env.find(name);
  if (it == env.end())
    throw UsageError(fmt::format("environment: {} is not set (needed with the other rank variables)", name));
  auto value = parse_int(it->second);
  if (!value || *value < min_value || *value > 1'000'000) {
    throw UsageError(fmt::format("environment: {}='{}' is not an integer >= {}", name, it->second, min_value));
  }
  return static_cast<int>(*value);
}

std::string string_variable(const EnvMap& env, const std::string& name, const std::string& fallback) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

// SLURM_JOB_ID-derived port, the same on every task of the job (slurm_port_for_job).
int port_from_slurm_job(const EnvMap& env) {
  auto it = env.find("SLURM_JOB_ID");
  auto id = it == env.end() ? std::nullopt : parse_int(it->second);
  return id ? slurm_port_for_job(*id) : kTorchDefaultMasterPort;
}

// Tasks of this step on this node: SLURM_STEP_TASKS_PER_NODE ("2(x3),1") at SLURM_NODEID, else
// SLURM_NTASKS_PER_NODE (which a step inherits from sbatch even when srun placed the tasks otherwise).
std::optional<int> tasks_on_this_node(const EnvMap& env) {
  auto per_node = env.find("SLURM_STEP_TASKS_PER_NODE");
  auto node_id = env.find("SLURM_NODEID");
  if (per_node != env.end() && node_id != env.end()) {
    auto index = parse_int(node_id->second);
    if (index) return slurm_tasks_on_node(per_node->second, static_cast<int>(*index));
  }
  return std::nullopt;
}

}  // namespace

WorkerIdentity worker_identity_from_environment(const EnvMap& env) {
  WorkerIdentity id;
  if (env.count("RANK")) {
    id.source = "RANK/WORLD_SIZE environment (torchrun contract)";
    id.rank = int_variable(env, "RANK", 0);
    id.world_size = int_variable(env, "WORLD_SIZE", 1);
    id.local_rank = env.count("LOCAL_RANK") ? int_variable(env, "LOCAL_RANK", 0) : id.rank;
    id.local_world_size = env.count("LOCAL_WORLD_SIZE") ? int_variable(env, "LOCAL_WORLD_SIZE", 1) : id.world_size;
    id.master_addr = string_variable(env, "MASTER_ADDR", "127.0.0.1");
    id.master_port = env.count("MASTER_PORT") ? int_variable(env, "MASTER_PORT", 1) : kTorchDefaultMasterPort;
    id.agent_hosts_store = string_variable(env, "TORCHELASTIC_USE_AGENT_STORE", "") == "True";
    id.restart_count = env.count("TORCHELASTIC_RESTART_COUNT") ? int_variable(env, "TORCHELASTIC_RESTART_COUNT", 0) : 0;
  } else if (env.count("SLURM_PROCID") && env.count("SLURM_NTASKS")) {
    id.source = "SLURM_PROCID/SLURM_NTASKS environment (srun, one task per rank)";
    id.rank = int_variable(env, "SLURM_PROCID", 0);
    id.world_size = int_variable(env, "SLURM_NTASKS", 1);
    id.local_rank = env.count("SLURM_LOCALID") ? int_variable(env, "SLURM_LOCALID", 0) : 0;
    if (auto local = tasks_on_this_node(env); local && *local >= 1) {
      id.local_world_size = *local;
    } else {
      id.local_world_size =
          env.count("SLURM_NTASKS_PER_NODE") ? int_variable(env, "SLURM_NTASKS_PER_NODE", 1) : id.world_size;
    }
    id.master_addr = string_variable(env, "MASTER_ADDR", "");
    if (id.master_addr.empty()) {
      // The first host of the step (SLURM_STEP_NODELIST), else of the allocation.
      auto first = slurm_first_host(env);
      id.master_addr = first ? first->value : "127.0.0.1";
    }
    id.master_port = env.count("MASTER_PORT") ? int_variable(env, "MASTER_PORT", 1) : port_from_slurm_job(env);
  } else {
    id.source = "no rank variables: a single process (world size 1)";
    return id;
  }
  if (id.rank >= id.world_size) {
    throw UsageError(
        fmt::format("environment: rank {} is not below the world size {} ({})", id.rank, id.world_size, id.source));
  }
  if (id.local_rank >= id.local_world_size) {
    throw UsageError(fmt::format("environment: local rank {} is not below the local world size {}", id.local_rank,
                                 id.local_world_size));
  }
  return id;
}

}  // namespace mgtrain
