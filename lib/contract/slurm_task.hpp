// The SLURM rules that the launcher and the worker share: the store port and run id derived from the job,
// the node list's first host, and the per-node task counts. The launcher uses them to fill launch settings
// (slurm/slurm_environment.hpp); the worker uses them for srun's one-task-per-rank layout
// (contract/worker_identity.hpp), so both arrive at the same address, port and run id.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include "util/environment.hpp"

namespace mgtrain {

// A value read from SLURM's environment and the variable it came from, e.g. {"2", "SLURM_STEP_NUM_NODES"}.
struct SlurmValue {
  std::string value;
  std::string source;
};

// The variable's trimmed value; nullopt when unset or blank.
std::optional<std::string> slurm_variable(const EnvMap& env, const std::string& name);
// The first of `names` that is set, as {value, name}.
std::optional<SlurmValue> slurm_first_variable(const EnvMap& env, std::initializer_list<const char*> names);

// The store port of a job, the same on every node and task: 20000 + SLURM_JOB_ID % 20000.
int slurm_port_for_job(long long job_id);
// The run id of a job, so a requeued job finds its checkpoints: "slurm-<SLURM_JOB_ID>".
std::string slurm_run_id(const std::string& job_id);
// The first host of the step's nodes (SLURM_STEP_NODELIST; the job's SLURM_JOB_NODELIST or
// SLURM_NODELIST outside a step): where node 0 of the step runs. nullopt: no node list.
// Throws UsageError naming the variable when the list is malformed.
std::optional<SlurmValue> slurm_first_host(const EnvMap& env);
// Tasks on the node with index `node_index` from SLURM's compressed per-node list, e.g. "2(x3),1".
std::optional<int> slurm_tasks_on_node(const std::string& tasks_per_node, int node_index);

}  // namespace mgtrain
