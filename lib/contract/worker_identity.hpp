// Who this worker is (rank, local rank, world size, store address) from the environment it was started
// with: mgtrain's or torchrun's contract (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), srun's one
// task per rank (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS), or nothing at all (a single process, world 1).
#pragma once

#include <string>

#include "util/environment.hpp"

namespace mgtrain {

// torch's MASTER_PORT when nothing gives one (torchrun's --master-port default): a worker started without
// MASTER_PORT, a SLURM job without SLURM_JOB_ID, and the `--hosts` launcher when launch.master_port is 0.
inline constexpr int kTorchDefaultMasterPort = 29500;

struct WorkerIdentity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: no store needed (world 1) or to be derived
  bool agent_hosts_store =
      false;              // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves the store, rank 0 too connects
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: keys in a long-lived store are kept apart per attempt
  std::string source;     // "torchrun/mgtrain environment", "SLURM", "single process"
};

// Throws UsageError naming the variable when a value is malformed or inconsistent.
WorkerIdentity worker_identity_from_environment(const EnvMap& env);

}  // namespace mgtrain
