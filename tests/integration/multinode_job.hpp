// What the multi-node tests (test_multinode.cpp, test_multinode_status.cpp) share: a static job's flags in network
// namespaces (netns_hosts.hpp), flags replaced or added, where a rank's log is, and the job's run.json.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch_fixture.hpp"
#include "netns_hosts.hpp"

namespace mgtrain::testing {

// Flags of a static job: node 0 at the first namespace's address, rendezvous on port 29500
// (every namespace has its own ports), short timeouts.
inline std::vector<std::string> static_flags(const NetnsHosts& hosts, const TempDir& dir, int node_rank,
                                             int nproc = 2) {
  return {"--nnodes",       "2",
          "--node-rank",    std::to_string(node_rank),
          "--master-addr",  hosts.address(0),
          "--master-port",  "29500",
          "--nproc",        std::to_string(nproc),
          "--run-id",       "mn",
          "--log-dir",      dir / "runs",
          "--grace-period", "1",
          "--join-timeout", "20",
          "--node-timeout", "4"};
}

// `args` plus `more`; a flag in `more` that `args` has already replaces its value there.
inline std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  for (std::size_t index = 0; index < more.size(); ++index) {
    auto found = std::find(args.begin(), args.end(), more[index]);
    if (more[index].rfind("--", 0) == 0 && more[index] != "--" && found != args.end() && index + 1 < more.size() &&
        found + 1 != args.end()) {
      *(found + 1) = more[++index];
      continue;
    }
    args.push_back(more[index]);
  }
  return args;
}

inline std::string rank_log(const TempDir& dir, int node, int attempt, int rank) {
  return dir / ("runs/mn/node_" + std::to_string(node) + "/attempt_" + std::to_string(attempt) + "/rank_" +
                std::to_string(rank) + "/stdout.log");
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The job's run.json (in the run folder every node shares here); null when it is missing or not JSON.
inline nlohmann::json job_record(const TempDir& dir) {
  return nlohmann::json::parse(read_text(dir / "runs/mn/run.json"), nullptr, false);
}

}  // namespace mgtrain::testing
