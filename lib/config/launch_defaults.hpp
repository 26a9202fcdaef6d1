// The defaults of the launch settings that more than one struct starts from: LaunchConfig (config.hpp) holds them
// as the keys' defaults, and the launch plan (supervise/launch_plan.hpp), the supervision policy
// (supervise/supervision_policy.hpp) and the rendezvous rounds (multinode/rendezvous_rounds.hpp) start their own
// fields from the same constants instead of repeating them. lib/output, below config, gets the role from its caller.
#pragma once

namespace mgtrain::launch_defaults {

inline constexpr double kGracePeriodS = 30.0;           // SIGTERM -> SIGKILL (torchrun's default)
inline constexpr double kJoinTimeoutS = 600.0;          // the nodes must meet within this (torchrun's default)
inline constexpr double kLastCallTimeoutS = 30.0;       // dynamic: wait for more nodes once MIN are there (torchrun's)
inline constexpr double kNodeTimeoutS = 30.0;           // silence after which a node counts as dead
inline constexpr double kNodeHeartbeatIntervalS = 5.0;  // between agent heartbeats (at most node_timeout / 3)
inline constexpr double kDiagnoseTimeoutS = 10.0;       // a hang's diagnostics (stack dumps) before the stop
inline constexpr const char* kRole = "default";         // torchrun's --role: the workers' ROLE_NAME

}  // namespace mgtrain::launch_defaults
