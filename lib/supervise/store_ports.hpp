// The workers' store port (MASTER_PORT) of each attempt of a single-node job, and its retries: when the port the
// launcher picked is taken by another program before rank 0 starts its store, the group starts again on a new port,
// not counted as a restart (SupervisionPolicy's max_port_retries). Which port an attempt gets, the console line of a
// retry, whether rank 0's failure was its store's start, and the failure report's hint.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "host/port_probe.hpp"
#include "output/console_writer.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/supervision_policy.hpp"

namespace mgtrain {

class StorePorts {
 public:
  // Port retries of a single-node job whose store port the launcher picked.
  static constexpr int kMaxPortRetries = 5;
  // How soon after its start rank 0 must fail for an "address already in use" to count as its store's start.
  static constexpr double kStoreStartWindowS = 120.0;

  // `first_port` is the master port of attempt 0 (already checked or picked, and reserved by `ports`). Later
  // attempts pick a fresh port through `ports` when plan.picks_port() (the probe's reservation moves to it).
  // Every reference is the supervisor's and outlives this object.
  StorePorts(const LaunchPlan& plan, PortProbe& ports, int first_port, const SupervisionPolicy& policy,
             ConsoleWriter& console);

  struct AttemptPort {
    int port = 0;
    bool retry = false;  // a port retry (announced), not a restart
  };
  // The store port of `attempt`; a multi-node round's (`coordinated`) is its plan's.
  AttemptPort begin_attempt(int attempt, bool coordinated);
  // The policy's question (WorkerGroupControl::store_port_taken), for a port the launcher picked: rank 0 (the
  // store's host) failed soon after `attempt_started` and the last lines of its stderr say the address was in use.
  bool store_port_taken(const WorkerFailure& root, std::chrono::steady_clock::time_point attempt_started) const;
  // Rank 0 of a single node said "address already in use" in `attempt`: most likely about its store's port; ""
  // when unlikely.
  std::string hint(int attempt) const;

 private:
  const LaunchPlan& plan_;
  PortProbe& ports_;
  int first_port_;
  const SupervisionPolicy& policy_;
  ConsoleWriter& console_;
  std::vector<int> port_by_attempt_;  // the workers' store port of each attempt
  int retries_announced_ = 0;
};

}  // namespace mgtrain
