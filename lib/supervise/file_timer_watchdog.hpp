// torch's file timers (TORCHELASTIC_ENABLE_FILE_TIMER=1) on the event loop: reads the workers' requests from the
// pipe (elastic/file_timer_pipe.hpp), signals the worker whose timer expired, and tells the policy
// (SupervisionPolicy::on_file_timer_fired). Which timer ended which worker stays known for the failure report.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "elastic/file_timer_pipe.hpp"
#include "output/console_writer.hpp"
#include "process/event_loop.hpp"
#include "supervise/supervision_policy.hpp"
#include "supervise/worker_roster.hpp"

namespace mgtrain {

class FileTimerWatchdog final : public LoopParticipant {
 public:
  // Creates the pipe at `path` (removed again on destruction). Throws UsageError.
  FileTimerWatchdog(const std::string& path, const WorkerRoster& workers, SupervisionPolicy& policy,
                    ConsoleWriter& console);
  // The timer that fired at `local_rank`'s worker in `attempt`, or nullptr (also after close_pipe).
  const ExpiredFileTimer* fired_at(int attempt, int local_rank) const;
  // Supervision is over: the pipe is removed now (the launcher may die by a signal next) and nothing is read.
  void close_pipe() { watch_.reset(); }

  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, LoopTime now) override;
  std::optional<LoopTime> next_deadline() const override;
  void on_time(LoopTime now) override;

 private:
  std::optional<FileTimerWatch> watch_;
  const WorkerRoster& workers_;
  SupervisionPolicy& policy_;
  ConsoleWriter& console_;
  std::map<std::pair<int, int>, ExpiredFileTimer> fired_;  // (attempt, local rank) -> the timer that fired
};

}  // namespace mgtrain
