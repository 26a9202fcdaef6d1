// What the nodes of a multi-node job must agree on, as text the rendezvous server can compare and
// explain: one "key=value" line per config key that shapes the job (every key outside `launch:`).
// Per-node settings (launch.*: nproc, node_rank, gpu_ids, log_dir, ...) are left out, and so are the
// values derived from them (${log_dir} in other keys); nproc, nnodes, run id and max_restarts travel in
// the join message and are compared one by one.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/config_loader.hpp"

namespace mgtrain {

struct JobFingerprint {
  std::string lines;  // "key=value\n" per compared key, in schema order
  std::string hash;   // XXH64 of `lines`, 16 hex digits
};

JobFingerprint job_fingerprint(const Config& config);
// Of a loaded config: its job view (config_loader.hpp), where values derived from the per-node
// launch.log_dir read "${log_dir}", so nodes with different --log-dir agree on the default
// checkpoint.dir while a checkpoint.dir that really differs still counts.
JobFingerprint job_fingerprint(const LoadedConfig& loaded);

// `lines` of a node whose run id was generated, as they would read with `adopted` instead (what the
// node will use once it adopts node 0's run id). Generated ids (date-time-hex) are distinctive enough
// to be replaced as text; an explicit id such as "mn" is never replaced (it could be part of "mnist").
std::string with_adopted_run_id(const std::string& lines, const std::string& generated, const std::string& adopted);

// The keys whose values differ between two fingerprints' lines, as "train.max_steps: 30 vs 20"
// (first value from `ours`), at most `limit` of them.
std::vector<std::string> fingerprint_differences(const std::string& ours, const std::string& theirs,
                                                 std::size_t limit = 3);

}  // namespace mgtrain
