// The hang diagnostics of a node (supervise's HangDiagnostics, done by diagnose's diagnose_ranks): when a hang is
// found, every running local rank's stacks.txt, its top frames and NCCL's flight recorder dumps, collected on a
// thread of its own so the event loop goes on (output, sockets, signals) until they are done or the deadline.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "diagnose/rank_diagnosis.hpp"
#include "supervise/supervisor.hpp"

namespace mgtrain {

class RankDiagnostics final : public HangDiagnostics {
 public:
  RankDiagnostics() = default;
  RankDiagnostics(const RankDiagnostics&) = delete;
  RankDiagnostics& operator=(const RankDiagnostics&) = delete;
  ~RankDiagnostics() override;  // waits for a collection still running (it ends by its deadline)

  void collect_diagnostics(int attempt, const std::vector<Target>& ranks,
                           std::chrono::steady_clock::time_point deadline) override;
  // True once the collection ended; then (once) prints where the stacks are and what could not be taken.
  bool done() override;
  std::string activity() const override { return "collecting every rank's stacks"; }
  std::vector<std::string> top_frames_of(int attempt, int global_rank) const override;

  // The last collection's result (after done()).
  const diagnose::NodeDiagnosis& last() const { return last_; }
  // One stack dump of this node's ranks at a time: the hang's collection and the status API's on-demand dump
  // (stacks_on_demand.hpp) share each rank's faulthandler.txt and ptrace. A hang's collection waits for an on-demand
  // dump to end (until its own deadline at most); an on-demand dump is refused (busy) while either runs.
  std::timed_mutex& dump_lock() { return dump_lock_; }

 private:
  void join();

  std::timed_mutex dump_lock_;  // before worker_: it outlives the collection
  std::thread worker_;
  std::atomic<bool> finished_{true};
  bool reported_ = true;
  int attempt_ = -1;
  std::string attempt_directory_;
  diagnose::NodeDiagnosis last_;
};

// The lines printed when a node's collection ended: where the stacks are, how long it took, and each rank's notes
// (what could not be taken and why). Pure.
std::vector<std::string> diagnosis_summary(const diagnose::NodeDiagnosis& diagnosis, const std::string& attempt_dir);

}  // namespace mgtrain
