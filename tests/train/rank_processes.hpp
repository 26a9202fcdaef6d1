// Runs `world` ranks of ddp_test_worker (tests/train/ddp_test_worker.cpp) as separate processes with torchrun's
// variables (a free port on loopback, OMP_NUM_THREADS=1) and collects what each printed: the multi-process DDP and
// SyncBatchNorm tests.
#pragma once

#include <future>
#include <map>
#include <string>
#include <vector>

#include "host/port_probe.hpp"
#include "process/run_capture.hpp"

namespace mgtrain::test {

inline const std::string kDdpTestWorker = std::string(MGTRAIN_BIN_DIR) + "/../tests/ddp_test_worker";

struct RankRuns {
  std::vector<CapturedRun> ranks;
  int port = 0;  // MASTER_PORT of the run; the shm segment's name contains it
  bool all_ok() const {
    for (const auto& r : ranks)
      if (r.exit_code != 0) return false;
    return true;
  }
  std::string errors() const {
    std::string text;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      text += "rank " + std::to_string(i) + ": " + ranks[i].out + ranks[i].err + "\n";
    return text;
  }
};

// Starts the ranks at once and waits for all of them; `env` adds to (or overrides) the rank's variables.
inline RankRuns run_ranks(int world, const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env = {}, double timeout_s = 60) {
  SocketPortProbe probe;
  const int port = probe.pick_free_port();
  std::vector<std::future<CapturedRun>> futures;
  for (int r = 0; r < world; ++r) {
    CaptureOptions options;
    options.timeout_s = timeout_s;
    options.set_env = {{"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(world)},
                       {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", std::to_string(world)},
                       {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", std::to_string(port)},
                       {"OMP_NUM_THREADS", "1"}};
    for (const auto& [key, value] : env) options.set_env[key] = value;
    std::vector<std::string> argv = {kDdpTestWorker};
    argv.insert(argv.end(), args.begin(), args.end());
    futures.push_back(std::async(std::launch::async, [argv, options] { return run_and_capture(argv, options); }));
  }
  RankRuns runs;
  runs.port = port;
  for (auto& f : futures) runs.ranks.push_back(f.get());
  return runs;
}

}  // namespace mgtrain::test
