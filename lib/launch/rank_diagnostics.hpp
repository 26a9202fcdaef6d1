// The one room where a node's ranks are dumped: a hang's diagnostics (supervise's HangDiagnostics: every running
// local rank's stacks.txt, its top frames and NCCL's flight recorder dumps) and the status API's POST /stacks
// (stacks_on_demand.hpp), one at a time. Each runs as a diagnose::RankDiagnosisRun on the supervisor's event loop, so
// the loop goes on (output, sockets, signals) while it waits, and no thread does the work. POST /stacks comes from the
// status server's HTTP thread: request_stacks hands it to the loop through an eventfd and waits for the answer there.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "diagnose/rank_diagnosis.hpp"
#include "launch/stacks_on_demand.hpp"
#include "supervise/supervisor.hpp"
#include "util/fd.hpp"

namespace mgtrain {

class RankDiagnostics final : public HangDiagnostics {
 public:
  explicit RankDiagnostics(diagnose::DumpOptions options = {});
  RankDiagnostics(const RankDiagnostics&) = delete;
  RankDiagnostics& operator=(const RankDiagnostics&) = delete;
  ~RankDiagnostics() override;  // a request still waiting is answered (the run has ended)

  // A hang's collection. An on-demand dump running now ends first (by its own deadline at most).
  void collect_diagnostics(int attempt, const std::vector<Target>& ranks,
                           std::chrono::steady_clock::time_point deadline) override;
  // True once the hang's collection ended; then (once) prints where the stacks are and what could not be taken.
  bool done() override;
  std::string activity() const override { return "collecting every rank's stacks"; }
  std::vector<std::string> top_frames_of(int attempt, int global_rank) const override;
  // The last hang collection's result (after done()).
  const diagnose::NodeDiagnosis& last() const { return last_; }

  // POST /stacks, from any thread but the loop's: the ranks `snapshot` shows running, dumped on the loop within
  // `timeout_s`. kBusy while a hang's collection or another request dumps; kNotRunning once the run has ended
  // (close_requests).
  StacksDump request_stacks(const StatusSnapshot& snapshot, double timeout_s);
  // The loop has ended: every waiting request is answered, and later ones at once.
  void close_requests();

  // Several nodes (docs/diagnosis.md#stacks-on-demand). The job's host asked this node to dump its ranks: on the
  // loop, `done` gets the answer when the dump ends (at once when busy or nothing runs); once requests are closed it
  // is dropped uncalled.
  void dump_for_job(const StatusSnapshot& snapshot, double timeout_s, std::function<void(StacksDump)> done);
  // On the job's host: a request whose snapshot is job-wide asks every node through `source` instead of dumping
  // this node's ranks, and is answered once `take` has the whole job's answer.
  struct JobStacksSource {
    std::function<std::optional<StacksDump>(double timeout_s)> start;  // a refusal as the answer; nullopt: asked
    std::function<std::optional<StacksDump>()> take;                   // the answer, once complete
  };
  void set_job_source(JobStacksSource source) { job_source_ = std::move(source); }

  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, LoopTime now) override;
  std::optional<LoopTime> next_deadline() const override;
  void on_time(LoopTime now) override;

 private:
  struct Request {
    StatusSnapshot snapshot;
    double timeout_s = 0;
    std::optional<StacksDump> answer;
  };
  struct HangCollection {
    std::vector<diagnose::RankProcess> ranks;
    LoopTime deadline;
  };

  void take_requests(LoopTime now);
  bool busy() const { return run_ || hang_waiting_; }
  void start_on_demand(StacksRequest plan, double timeout_s, LoopTime now);
  void answer(Request& request, StacksDump dump);
  void start_hang(const HangCollection& collection);
  void run_ended(LoopTime now);

  diagnose::DumpOptions options_;
  Fd wake_;  // eventfd: a request is waiting
  std::mutex mutex_;
  std::condition_variable answered_;
  std::vector<std::shared_ptr<Request>> waiting_;  // guarded by mutex_, as every Request::answer and closed_
  bool closed_ = false;
  // The loop's side.
  std::unique_ptr<diagnose::RankDiagnosisRun> run_;  // the dump running now: on_demand_'s, else the hang's
  std::shared_ptr<Request> on_demand_;               // the dump running now answers this POST /stacks
  std::function<void(StacksDump)> for_job_;          // or the job's host (dump_for_job)
  StacksRequest on_demand_plan_;
  JobStacksSource job_source_;
  std::shared_ptr<Request> job_request_;  // a job-wide POST /stacks waiting for every node's answer
  LoopTime job_poll_{};
  std::optional<HangCollection> hang_waiting_;  // found while an on-demand dump ran
  bool hang_finished_ = true;
  bool reported_ = true;
  int attempt_ = -1;
  std::string attempt_directory_;
  diagnose::NodeDiagnosis last_;
};

// The lines printed when a node's collection ended: where the stacks are, how long it took, and each rank's notes
// (what could not be taken and why). Pure.
std::vector<std::string> diagnosis_summary(const diagnose::NodeDiagnosis& diagnosis, const std::string& attempt_dir);

}  // namespace mgtrain
