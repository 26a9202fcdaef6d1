// A multi-node job's run.json, kept by the node agent that hosts the rendezvous (docs/monitoring.md#run-history): the
// rendezvous' rounds (who took part, why each started and ended) with each recovery's figures in seconds from the
// fault (docs/monitoring.md#recovery), and one console line per recovery once its first step is seen.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "multinode/rendezvous_rounds.hpp"
#include "observe/run_record.hpp"
#include "supervise/launch_plan.hpp"
#include "wire/node_status.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain {

// The rounds as run.json keeps them: steady times become Unix seconds by their distance from now; a round that ended
// by a failure or a regroup gets its recovery once the next round has started.
std::vector<RoundEntry> round_entries(const std::vector<rdzv::RoundRecord>& rounds);

// A node's snapshot replication from its status report (which has one), heard at `time` (Unix seconds).
NodeReplication node_replication(const rdzv::NodeStatus& node, double time);

// "mgtrain: recovery from round 0's failure (rank 3 ...): failure detected +0.00 s, workers stopped +0.28 s,
// rendezvous complete +0.28 s, first step +1.93 s after the fault; 37 steps lost (step 421 reached, resumed from 384)".
std::string recovery_line(const RoundEntry& round);

// Static node 0 opens the record before the job (launch.cpp); any other host (a dynamic job's) once the first round
// has fixed the run id, in <log_dir>/<run_id>/. Every change of the rounds rewrites it.
class JobRecord {
 public:
  // `record` is the launch's, empty until opened here or by the launch; both outlive this object.
  JobRecord(const LaunchPlan& plan, std::optional<RunRecorder>& record);
  // The rounds so far and the job's run id ("" before the first round: nothing to write yet).
  void update(const std::vector<rdzv::RoundRecord>& rounds, const std::string& run_id);
  // The nodes' latest reports: their snapshot replication, kept for run.json's "replication" (written with the next
  // change of the rounds, and by write_replication).
  void note_replication(const std::vector<rdzv::NodeStatus>& nodes);
  // run.json's "replication" now, when the record is open and anything was noted (the job's end).
  void write_replication();

 private:
  const LaunchPlan& plan_;
  std::optional<RunRecorder>& record_;
  std::string signature_;
  std::size_t announced_ = 0;                                           // rounds whose recovery the console has seen
  std::map<std::pair<int, std::string>, NodeReplication> replication_;  // by node rank and host
};

}  // namespace mgtrain
