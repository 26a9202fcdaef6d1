// The variables mgtrain's launcher sets for its workers on top of torchrun's (RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR, ...; supervise/worker_env.hpp builds the whole environment). They live outside the
// MGTRAIN_<SECTION>_ config namespace so they never collide with config keys. The console variables
// (MGTRAIN_CONSOLE_IS_TTY, MGTRAIN_CONSOLE_COLUMNS) are in contract/console_progress.hpp.
#pragma once

namespace mgtrain {

inline constexpr const char* kRunDirVariable = "MGTRAIN_RUN_DIR";          // <log_dir>/<run_id>
inline constexpr const char* kConfigFileVariable = "MGTRAIN_CONFIG_FILE";  // the resolved config.yaml
// The per-rank progress file (contract/heartbeat_line.hpp): set while hang or straggler detection or the status
// API reads it.
inline constexpr const char* kHeartbeatFileVariable = "MGTRAIN_HEARTBEAT_FILE";
// The worker's snapshot store (checkpoint/snapshot_store.hpp, checkpoint/snapshot_stores.hpp): the number of an
// inherited descriptor of a memfd the launcher keeps across the worker's restarts (docs/checkpoints.md).
inline constexpr const char* kSnapshotFdVariable = "MGTRAIN_SNAPSHOT_FD";
// Local rank 0's: the replicas its launcher holds of another node's ranks' snapshots (replicate/), as "rank:fd,..."
// (inherited descriptors of stores of the same layout); unset when it holds none.
inline constexpr const char* kSnapshotReplicasVariable = "MGTRAIN_SNAPSHOT_REPLICAS";
// The multi-node rendezvous secret (launch/rendezvous_secret.hpp). Read by the launcher, never passed to workers.
inline constexpr const char* kRendezvousTokenVariable = "MGTRAIN_RDZV_TOKEN";

}  // namespace mgtrain
