// Stacks on demand across nodes (docs/diagnosis.md#stacks-on-demand): POST /stacks on the job's host (`mgtrain status
// --stacks`) dumps every running rank of every node without stopping the job. The host's rendezvous server asks each
// member of the round (kDumpStacks, the host's own agent too); each agent dumps its own ranks into its own run folder
// and answers with where the files are and each rank's top frames (kStacksDumped); the server gathers the answers
// until every asked member answered or the deadline passed (JobStacksRequest), and the host answers the request with
// them. The messages, the bounds and the server's side are here; no I/O.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "multinode/node_table.hpp"
#include "multinode/rounds_outside.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv {

// What one answer carries, bounded so that it always fits a frame (kMaxPayloadBytes): the stacks files hold the rest.
inline constexpr int kMaxStacksRanks = 256;              // ranks of one node; more are counted, not listed
inline constexpr int kMaxStacksLines = 6;                // top frames of one rank
inline constexpr int kMaxStacksNotes = 3;                // notes of one rank
inline constexpr std::size_t kMaxStacksLineBytes = 240;  // one frame, note or path (longer: cut, marked "...")
// How long past the dump's own timeout the server waits for the answers (the nodes start a little later, write their
// files, and the answers travel).
inline constexpr double kStacksSlackS = 2.0;

// One rank's part of a node's dump.
struct RankStacksRow {
  int rank = 0;
  int local_rank = 0;
  long pid = -1;
  std::string outcome;  // "complete", "partial" or "failed"
  bool python_frames = false;
  bool native_frames = false;
  double seconds = 0;
  std::string stacks_file;  // on that node; "" when none was written
  std::vector<std::string> top_frames;
  std::vector<std::string> notes;
};

// How a node's dump went.
enum class NodeStacksOutcome { kDumped, kBusy, kNotRunning };

// A node's answer to kDumpStacks (kStacksDumped).
struct NodeStacks {
  int request = 0;  // the request it answers
  int round = 0;
  int node_rank = 0;
  std::string host;
  NodeStacksOutcome outcome = NodeStacksOutcome::kDumped;
  std::string message;  // kBusy, kNotRunning: why
  int attempt = 0;
  double time = 0;     // Unix seconds when the node's dump began
  double seconds = 0;  // how long it took there
  std::vector<RankStacksRow> ranks;
  int ranks_left_out = 0;  // past kMaxStacksRanks

  // Cuts what is past the bounds above (counted in ranks_left_out, marked in the lines).
  Message to_message() const;
  // Throws ProtocolError for an answer that does not parse or is past the bounds.
  static NodeStacks from(const Message& message);
};

// The server's request to a member: dump your running ranks within `timeout_s`.
Message dump_stacks_message(int round, int request, double timeout_s);

// What the host gathered for one request.
struct JobStacks {
  int round = 0;
  double seconds = 0;                   // from the request to the last answer (or the deadline)
  std::vector<NodeStacks> nodes;        // the answers, by node rank
  std::vector<std::string> unanswered;  // "node 1 (hostB, 10.77.0.2): no answer within 14 s", by node rank
};

// Why a request was not started: busy (another is being answered) or nothing runs.
struct StacksRefusal {
  bool busy = false;
  std::string why;
};

// The rendezvous server's side of one request at a time: whom it asked, what came back, the deadline.
class JobStacksRequest {
 public:
  // Asks and names the nodes through `nodes` (which sends through the server's outbox).
  explicit JobStacksRequest(NodeTable& nodes) : nodes_(nodes) {}

  // Asks every member of `round` (its workers running) to dump within `timeout_s`. Returns why not when a request
  // is in flight or no member runs workers.
  std::optional<StacksRefusal> start(int round, double timeout_s, SteadyTime now);
  bool in_flight() const { return deadline_.has_value(); }
  std::optional<SteadyTime> deadline() const { return deadline_; }
  // `node`'s answer (one for another request or round is ignored).
  void answered(const NodeTable::Node& node, NodeStacks stacks, SteadyTime now);
  // A member is gone (lost, left): it will not answer.
  void forget(ConnectionId connection);
  // Once every asked member answered or the deadline passed: what was gathered (once); the request is over.
  std::optional<JobStacks> take(SteadyTime now);

 private:
  NodeTable& nodes_;
  int next_request_ = 1;
  int request_ = 0;
  int round_ = 0;
  double timeout_s_ = 0;
  SteadyTime started_{};
  SteadyTime last_answer_{};
  std::optional<SteadyTime> deadline_;
  std::map<ConnectionId, std::string> owing_;  // asked members that have not answered, with their names
  std::map<int, NodeStacks> answers_;          // by node rank
  std::vector<std::string> gone_;              // asked members that went away
};

}  // namespace mgtrain::rdzv
