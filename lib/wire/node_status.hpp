// A node's status report to the job's host (rdzv::MessageType::kNodeStatus; docs/monitoring.md#several-nodes): its
// ranks as its launcher sees them, one line of fields per rank on the wire ('-' for unknown), and its snapshot
// replication (replicate/) in optional fields. Pure: no sockets.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "contract/heartbeat_line.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv {

// One rank in a node's status report (kNodeStatus): what the node's launcher sees of it. Optional figures are unknown
// (no progress file, no resource sample yet).
struct RankRow {
  int rank = 0;
  int local_rank = 0;
  long pid = 0;
  std::string state;  // "running" or "exited"
  std::optional<long long> step;
  std::optional<double> loss;
  std::optional<double> beat_time;  // Unix seconds of its last heartbeat
  // Its progress file, for the host's straggler detection: when it was written (Unix seconds on that node: only
  // differences count, so a clock offset between nodes cancels out) and the rank's own-work seconds then.
  std::optional<double> progress_time;
  std::optional<double> busy;
  std::optional<long long>
      start_step;  // the step the rank's run started from, when its worker says (heartbeat "start")
  std::optional<StartSource> start_source;  // and what it was: none, checkpoint or snapshot (heartbeat "from")
  std::optional<long long> snapshot_step;   // its newest snapshot in memory (heartbeat "snapshot")
  std::optional<double> snapshot_time;      // when that snapshot was completed (Unix seconds on that node)
  std::optional<double> cpu_percent;
  std::optional<long long> rss_bytes;
  std::optional<double> step_rate;
  bool straggler = false;
};

// A node's snapshot replication (replicate/snapshot_replication.hpp) in its status report: what it sent its buddy and
// what it holds of the node before it in the ring.
struct ReplicaStatus {
  std::string buddy;       // "node 2 (hostC, 10.77.0.3)"; "": none this round
  bool connected = false;  // to the buddy, now
  long long sent = 0;      // snapshots sent whole
  long long skipped = 0;   // snapshots not sent: overtaken, or overwritten in flight (the link is slower)
  long long bytes_sent = 0;
  std::optional<long long> sent_step;  // the newest snapshot sent whole, and when its rank took it (Unix seconds)
  std::optional<double> sent_time;
  long long received = 0;  // snapshots received whole and verified
  struct Held {
    int rank = 0;
    long long step = 0;
    double time = 0;  // when the rank took it (Unix seconds on its node)
  };
  std::vector<Held> held;  // the newest replica of each rank this node holds
};

// A node's ranks in one round, as its agent reports them to the job's host: when a rank's process changes (started,
// exited), and every few seconds for the figures. The host keeps each node's latest report of the current round.
struct NodeStatus {
  int round = 0;
  int node_rank = 0;
  std::string host;  // hostname
  std::vector<RankRow> ranks;
  std::optional<ReplicaStatus> replication;  // unset: the node replicates nothing (or says nothing of it)

  Message to_message() const;
  // Throws ProtocolError for a report that does not parse, or of more than kMaxStatusRanks ranks.
  static NodeStatus from(const Message& message);
};
inline constexpr int kMaxStatusRanks = 4096;

}  // namespace mgtrain::rdzv
