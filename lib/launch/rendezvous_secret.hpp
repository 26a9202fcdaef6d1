// Where a node agent's rendezvous token comes from (docs/multinode.md#the-rendezvous-token): --rdzv-token, else
// MGTRAIN_RDZV_TOKEN, else the file launch.rdzv_token_file names ("-": the first line of stdin, as the --hosts
// launcher passes its token to the agents it starts), else, inside a SLURM job, one derived from the
// job id and a per-user key file that only the user can read (every task of the job runs as the user and, on a
// cluster with a shared home, reads the same key); else none.
#pragma once

#include <optional>
#include <string>

#include "config/config.hpp"
#include "contract/worker_variables.hpp"
#include "util/environment.hpp"
#include "wire/frame_auth.hpp"

namespace mgtrain {

// Throws UsageError for a token that is too short, a token file that cannot be read, is not a regular file, is
// larger than 4 KiB or can be read by other users. `slurm_job_id`: non-empty inside a SLURM job.
rdzv::RendezvousToken rendezvous_token(const LaunchConfig& launch, const std::optional<std::string>& flag_token,
                                       const EnvMap& environment, const std::string& slurm_job_id);

// The per-user key a SLURM job's token is derived from: $XDG_CONFIG_HOME/mgtrain/rdzv.key (default
// ~/.config/mgtrain/rdzv.key), made with 32 random bytes (mode 0600) when it does not exist yet.
std::string slurm_key_path(const EnvMap& environment);

}  // namespace mgtrain
