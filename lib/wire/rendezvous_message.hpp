// The node agents' rendezvous protocol on the wire: framing (magic, protocol version, type, length),
// a checked incremental decoder that turns garbage into clear errors, and the typed messages agents
// and the rendezvous server exchange (docs/multinode.md). Pure: no sockets.
//
// Frame: "MGRV" | u16 protocol version | u16 message type | u32 payload length  (big endian), the payload,
// and, when the type's top bit (kTaggedBit) is set, a 32-byte authentication tag (frame_auth.hpp).
// Payload: u16 field count, then per field: u16 name length, name, u32 value length, value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract/heartbeat_line.hpp"
#include "util/exit_status.hpp"

namespace mgtrain::rdzv {

// 2: regroup (elastic scale-up), assign's restart_count; 3: hello first, authentication tags; 4: join's role,
// assign's role ranks (an agent of version 3 would not say its role, and would give its workers wrong ROLE_RANKs);
// 5: hang-found, diagnose, diagnosed (every node's stacks before a hang's stop), a failure's hang facts
// 7: node-status (each node's ranks for the job-wide status API on the rendezvous host)
// 9: snapshot-part (snapshots in memory copied to the buddy node's launcher), join's replica_port, assign's buddy
inline constexpr std::uint16_t kProtocolVersion = 9;
inline constexpr std::size_t kHeaderBytes = 12;
inline constexpr std::uint16_t kTaggedBit = 0x8000;  // in the type field: an authentication tag follows the payload
inline constexpr std::size_t kTagBytes = 32;         // HMAC-SHA256
inline constexpr std::size_t kMaxPayloadBytes = 1 << 20;

// Bytes that are not this protocol (another program on the port, a different mgtrain version).
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class MessageType : std::uint16_t {
  kJoin = 1,           // agent -> server: who I am and what I run
  kAssign = 2,         // server -> agent: a round starts; your node rank, the ranks, the workers' store
  kWait = 3,           // server -> agent: joined, but a round is running; you start at the next one
  kReject = 4,         // server -> agent: the nodes disagree (or bad request); exit with the code
  kHeartbeat = 5,      // both ways
  kWorkersFailed = 6,  // agent -> server: a local worker failed (sent at once)
  kWorkersEnded = 7,   // agent -> server: every local worker of the round has exited
  kStop = 8,           // server -> agent: stop your workers (another node failed)
  kFinish = 9,         // server -> agent: the job is over; exit with the code
  kLeave = 10,         // agent -> server: this agent is going away (it got a signal)
  kRegroup = 11,       // server -> agent: a node arrived (elastic scale-up): stop your workers; a larger round
                       // follows, and it is not a failure (no restart of --max-restarts is used)
  kHello = 12,         // both ways, first on every connection, never tagged: the sender's nonce and whether it
                       // authenticates its frames (frame_auth.hpp)
  kHangFound = 13,     // agent -> server: this node found a hang; its workers run while it collects diagnostics
  kDiagnose = 14,      // server -> agent: another node found a hang: collect your ranks' diagnostics, keep them running
  kDiagnosed = 15,     // agent -> server: diagnostics collected; this node's stalled ranks with their progress facts
  kNodeStatus = 16,    // agent -> server: this node's ranks as its launcher sees them (the job-wide status API)
  kDumpStacks = 17,    // server -> agent: dump your running ranks' stacks now, keep them running (POST /stacks)
  kStacksDumped = 18,  // agent -> server: where this node's stacks files are, with each rank's top frames
  kSnapshotPart = 19,  // agent -> its buddy's agent (their own connection): a piece of a snapshot in memory
                       // (replicate/snapshot_part.hpp); never to or from the rendezvous server
};
// The last type of this version (the decoder refuses higher ones).
inline constexpr MessageType kLastMessageType = MessageType::kSnapshotPart;
std::string type_name(MessageType type);

// One message: a type and named string fields (typed accessors throw ProtocolError naming the field).
struct Message {
  MessageType type = MessageType::kHeartbeat;
  std::map<std::string, std::string> fields;

  // An empty message of `type`, for the typed builders: Message::of(MessageType::kStop).set("round", 3).
  static Message of(MessageType type) { return Message{type, {}}; }
  Message& set(const std::string& name, const std::string& value);
  // Without it a string literal would choose the bool overload.
  Message& set(const std::string& name, const char* value) { return set(name, std::string(value)); }
  Message& set(const std::string& name, long long value);
  Message& set(const std::string& name, int value) { return set(name, static_cast<long long>(value)); }
  Message& set(const std::string& name, double value);
  Message& set(const std::string& name, bool value);
  bool has(const std::string& name) const { return fields.count(name) != 0; }
  const std::string& text(const std::string& name) const;
  long long integer(const std::string& name) const;
  double number(const std::string& name) const;
  bool flag(const std::string& name) const;
};

// The frame of one message, untagged.
std::string encode(const Message& message);
// The frame with kTaggedBit set and the tag `sign` computes over the header and payload appended.
std::string encode_tagged(const Message& message, const std::function<std::string(const std::string&)>& sign);

// A frame as it arrived: its message, the bytes its tag covers (header and payload) and the tag (empty when
// the frame is untagged).
struct Frame {
  Message message;
  std::string covered;
  std::string tag;
};

// Cuts a byte stream into frames. Throws ProtocolError on the first byte that cannot be part of a
// valid frame (wrong magic, other protocol version, unknown type, oversized or malformed payload).
class MessageDecoder {
 public:
  void feed(const char* data, std::size_t size);
  // The next complete frame, if one has arrived.
  std::optional<Frame> next_frame();
  // Its message alone (tests and the fuzzer; connections check the tag through next_frame).
  std::optional<Message> next();
  std::size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;
  std::size_t consumed_ = 0;
};

// ---- typed messages ------------------------------------------------------------------------

struct JoinRequest {
  std::string version;  // mgtrain version
  int node_rank = -1;   // static: --node-rank; -1: assigned on arrival (dynamic)
  std::string hostname;
  std::string agent_id;  // unique per agent: hostname:pid
  int nproc = 1;
  std::string role = "default";  // --role (launch.role): its workers' ROLE_NAME; ranks are numbered per role
  std::string nnodes;            // as configured: "2" or "1:4"
  std::string run_id;
  bool run_id_generated = false;  // no run id was given: adopt the others'
  int max_restarts = 0;
  bool allow_uneven_nproc = false;
  std::string config_hash;   // of config_lines
  std::string config_lines;  // "key=value\n" for every key that must agree (job_fingerprint.hpp)
  std::string cpu_sharing;   // CpuAllowance::sharing_key(): nodes with the same key run on the same CPUs; "": unknown
  int replica_port = 0;      // where this agent takes its buddy's snapshots (replicate/); 0: it takes none

  Message to_message() const;
  static JoinRequest from(const Message& message);
};

struct Assignment {
  int round = 0;                    // the job's round: attempt_<round>/ of the logs
  int restart_count = 0;            // TORCHELASTIC_RESTART_COUNT: restarts after failures so far
                                    // (a scale-up round is a new round but no restart, as in torchrun)
  int node_rank = 0;                // the receiver's
  std::vector<int> nproc_per_node;  // by node rank; on the wire run-length coded ("2*63,1"): an
                                    // assignment stays small however many nodes the job has
  std::string node_name;            // the receiver's, "node 1 (hostB, 10.77.0.2)", for messages
  std::string master_addr;          // the workers' store (global rank 0's node)
  int master_port = 0;
  std::string run_id;
  int max_restarts = 0;
  int role_first_rank = 0;       // the receiver's: ROLE_RANK of its local rank 0 (role_ranks below)
  int role_world_size = 0;       // the receiver's: ROLE_WORLD_SIZE, the workers of its role on every node
  int workers_sharing_cpus = 0;  // the receiver's: the workers of the nodes on its CPUs (same cpu_sharing), its own
                                 // included; they divide those CPUs among their OpenMP threads
  std::string buddy_host;        // the receiver's: where the next node of the ring takes its snapshots (the address
  int buddy_port = 0;            // it connects to the server from, and its join's replica_port); port 0: none (one
  std::string buddy_name;        // node, or it takes none); "node 2 (hostC, 10.77.0.3)"

  int nnodes() const { return static_cast<int>(nproc_per_node.size()); }
  int world_size() const;
  int first_rank(int node) const;  // sum of nproc of the nodes before `node`
  Message to_message() const;
  static Assignment from(const Message& message);
};
// Ranks within a role, as torch's elastic agent numbers them (api.py, _assign_worker_ranks): the nodes in node-rank
// order, a node's first role rank is the number of workers of the nodes before it with the same role, and a role's
// world size is the number of its workers on every node. Roles are compared as text; global ranks ignore them.
struct RoleRanks {
  int first_rank = 0;
  int world_size = 0;
};
// `roles` and `nproc_per_node` by node rank (the same length); the result too.
std::vector<RoleRanks> role_ranks(const std::vector<std::string>& roles, const std::vector<int>& nproc_per_node);

// By node: the workers of the nodes with the same non-empty key (`keys` and `nproc_per_node` by node rank); a node
// without a key shares its CPUs with nobody else of the job.
std::vector<int> workers_sharing_cpus(const std::vector<std::string>& keys, const std::vector<int>& nproc_per_node);

// The largest job an assignment may describe (a bound for the decoder, far above any real job).
inline constexpr int kMaxAssignedNodes = 1 << 20;

// The first failure of a round, as the failing node (or the server, for a lost node) describes it.
struct NodeFailure {
  int round = 0;
  int node_rank = -1;
  std::string node;        // "node 1 (hostB, 10.77.0.2)"
  std::string host;        // hostname
  bool node_lost = false;  // the node itself went away (silent, disconnected, stopped); no rank
  int global_rank = -1;
  int local_rank = -1;
  long pid = 0;
  int exit_code = 1;  // what every agent exits with when this ends the job
  int signal = 0;     // the worker died by this signal; 0: it exited
  bool hung = false;
  double silent_s = 0.0;
  std::string outcome;  // "exit code 3", "sent nothing for 10 s"
  std::string time_utc;
  std::string stderr_log;  // on that host
  std::vector<std::string> stderr_tail;
  std::string error_message;  // from TORCHELASTIC_ERROR_FILE
  // A hang (docs/diagnosis.md): waiting for the hung rank, its progress and stacks.
  bool waiting = false;
  long long last_progress_ms = 0;  // Unix milliseconds of its last progress report; 0: unknown
  bool has_last_step = false;
  long long last_step = 0;
  bool process_stopped = false;
  std::string stacks;  // attempt_<n>/rank_<r>/stacks.txt on that host
  std::vector<std::string> top_frames;

  // One line: "rank 3 (local rank 1) on node 1 (hostB, 10.77.0.2): exit code 3".
  std::string summary() const;
  // The worker's exit status: killed by `signal`, else exited with `exit_code`.
  ExitStatus status() const;
  void write_to(Message& message, const std::string& prefix) const;
  static NodeFailure read_from(const Message& message, const std::string& prefix);
};

// A list of failures in `message` under `prefix` ("<prefix>count", then "<prefix><i>."), at most `limit` of them;
// read_failures throws ProtocolError for a count above `limit`.
void write_failures(Message& message, const std::string& prefix, const std::vector<NodeFailure>& failures, int limit);
std::vector<NodeFailure> read_failures(const Message& message, const std::string& prefix, int limit);

// Outcomes of a node's round in kWorkersEnded.
inline constexpr const char* kEndedSuccess = "success";        // every worker exited 0
inline constexpr const char* kEndedCheckpoint = "checkpoint";  // saved a checkpoint and stopped (75)
inline constexpr const char* kEndedFailed = "failed";
inline constexpr const char* kEndedStopped = "stopped";  // stopped on the server's request

Message workers_failed_message(const NodeFailure& failure);
Message workers_ended_message(int round, const std::string& outcome, int exit_code);
Message stop_message(int round, const std::string& reason);
// `reason`: "hostC (10.77.0.3) arrived; restarting the round with 3 nodes ..."; `nodes`: the next round's size.
Message regroup_message(int round, int nodes, const std::string& reason);
Message finish_message(int exit_code, const std::string& text, const std::optional<NodeFailure>& root_cause);
Message reject_message(int exit_code, const std::string& text);
Message wait_message(const std::string& text);
Message leave_message(int exit_code, const std::string& reason);
Message heartbeat_message();
// `nonce`: 16 random bytes as hex; `authenticated`: the sender tags its frames (it has a rendezvous token).
Message hello_message(const std::string& nonce, bool authenticated);
inline constexpr const char* kAuthHmac = "hmac-sha256";
inline constexpr const char* kAuthNone = "none";

}  // namespace mgtrain::rdzv
