// Encoding and checked decoding of rendezvous messages, and the typed messages on top.
#include "wire/rendezvous_message.hpp"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/value_parsing.hpp"

namespace mgtrain::rdzv {
namespace {

constexpr char kMagic[4] = {'M', 'G', 'R', 'V'};
constexpr std::uint16_t kLastType = static_cast<std::uint16_t>(kLastMessageType);

void put_u16(std::string& out, std::uint16_t value) {
  out += static_cast<char>(value >> 8);
  out += static_cast<char>(value & 0xff);
}
void put_u32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((value >> shift) & 0xff);
}
std::uint16_t get_u16(const unsigned char* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }
std::uint32_t get_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// "47 45 54 20 ('GET ')": how unexpected bytes look, for the error message.
std::string show_bytes(const char* data, std::size_t size) {
  std::size_t shown = std::min<std::size_t>(size, 8);
  std::string hex, text;
  for (std::size_t i = 0; i < shown; ++i) {
    unsigned char c = static_cast<unsigned char>(data[i]);
    hex += fmt::format("{}{:02x}", i ? " " : "", c);
    text += std::isprint(c) ? static_cast<char>(c) : '.';
  }
  return fmt::format("{} ('{}')", hex, text);
}

std::vector<std::string> split_list(const std::string& text, char separator) {
  if (text.empty()) return {};
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    std::size_t end = text.find(separator, start);
    items.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return items;
}

}  // namespace

std::string type_name(MessageType type) {
  switch (type) {
    case MessageType::kJoin:
      return "join";
    case MessageType::kAssign:
      return "assign";
    case MessageType::kWait:
      return "wait";
    case MessageType::kReject:
      return "reject";
    case MessageType::kHeartbeat:
      return "heartbeat";
    case MessageType::kWorkersFailed:
      return "workers-failed";
    case MessageType::kWorkersEnded:
      return "workers-ended";
    case MessageType::kStop:
      return "stop";
    case MessageType::kFinish:
      return "finish";
    case MessageType::kLeave:
      return "leave";
    case MessageType::kRegroup:
      return "regroup";
    case MessageType::kHello:
      return "hello";
    case MessageType::kHangFound:
      return "hang-found";
    case MessageType::kDiagnose:
      return "diagnose";
    case MessageType::kNodeStatus:
      return "node-status";
    case MessageType::kDiagnosed:
      return "diagnosed";
    case MessageType::kDumpStacks:
      return "dump-stacks";
    case MessageType::kStacksDumped:
      return "stacks-dumped";
    case MessageType::kSnapshotPart:
      return "snapshot-part";
  }
  return fmt::format("type {}", static_cast<int>(type));
}

Message& Message::set(const std::string& name, const std::string& value) {
  fields[name] = value;
  return *this;
}
Message& Message::set(const std::string& name, long long value) { return set(name, std::to_string(value)); }
Message& Message::set(const std::string& name, double value) { return set(name, format_number(value)); }
Message& Message::set(const std::string& name, bool value) { return set(name, std::string(value ? "1" : "0")); }

const std::string& Message::text(const std::string& name) const {
  auto found = fields.find(name);
  if (found == fields.end())
    throw ProtocolError(fmt::format("{} message without the field '{}'", type_name(type), name));
  return found->second;
}

long long Message::integer(const std::string& name) const {
  auto value = parse_int(text(name));
  if (!value)
    throw ProtocolError(
        fmt::format("{} message: field '{}' is not an integer: '{}'", type_name(type), name, text(name)));
  return *value;
}

double Message::number(const std::string& name) const {
  auto value = parse_number(text(name));
  if (!value)
    throw ProtocolError(fmt::format("{} message: field '{}' is not a number: '{}'", type_name(type), name, text(name)));
  return *value;
}

bool Message::flag(const std::string& name) const {
  const std::string& value = text(name);
  if (value != "0" && value != "1") {
    throw ProtocolError(fmt::format("{} message: field '{}' is not 0 or 1: '{}'", type_name(type), name, value));
  }
  return value == "1";
}

namespace {

std::string encode_frame(const Message& message, std::uint16_t type_flags) {
  std::string payload;
  put_u16(payload, static_cast<std::uint16_t>(message.fields.size()));
  for (const auto& [name, value] : message.fields) {
    put_u16(payload, static_cast<std::uint16_t>(name.size()));
    payload += name;
    put_u32(payload, static_cast<std::uint32_t>(value.size()));
    payload += value;
  }
  if (payload.size() > kMaxPayloadBytes) {
    throw ProtocolError(fmt::format("{} message of {} bytes is larger than the limit of {} bytes",
                                    type_name(message.type), payload.size(), kMaxPayloadBytes));
  }
  std::string frame(kMagic, sizeof kMagic);
  put_u16(frame, kProtocolVersion);
  put_u16(frame, static_cast<std::uint16_t>(static_cast<std::uint16_t>(message.type) | type_flags));
  put_u32(frame, static_cast<std::uint32_t>(payload.size()));
  return frame + payload;
}

}  // namespace

std::string encode(const Message& message) { return encode_frame(message, 0); }

std::string encode_tagged(const Message& message, const std::function<std::string(const std::string&)>& sign) {
  std::string frame = encode_frame(message, kTaggedBit);
  return frame + sign(frame);
}

void MessageDecoder::feed(const char* data, std::size_t size) {
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ >= 65536 && consumed_ * 2 >= buffer_.size()) {
    // A stream whose reads never end on a frame boundary would otherwise keep every byte it ever sent.
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(data, size);
}

std::optional<Message> MessageDecoder::next() {
  std::optional<Frame> frame = next_frame();
  if (!frame) return std::nullopt;
  return std::move(frame->message);
}

std::optional<Frame> MessageDecoder::next_frame() {
  const char* start = buffer_.data() + consumed_;
  std::size_t available = buffer_.size() - consumed_;
  // Check the magic as soon as its first bytes are here: a wrong peer is reported at once, not
  // after it happened to send 12 bytes.
  std::size_t magic_bytes = std::min<std::size_t>(available, sizeof kMagic);
  if (std::memcmp(start, kMagic, magic_bytes) != 0) {
    throw ProtocolError("not an mgtrain rendezvous peer: it sent " + show_bytes(start, available) +
                        " where a message starts with 'MGRV'");
  }
  if (available < kHeaderBytes) return std::nullopt;
  const auto* header = reinterpret_cast<const unsigned char*>(start);
  std::uint16_t version = get_u16(header + 4);
  if (version != kProtocolVersion) {
    throw ProtocolError(
        fmt::format("the peer speaks rendezvous protocol version {}, this mgtrain speaks version {}: "
                    "install the same mgtrain version on every node",
                    version, kProtocolVersion));
  }
  const std::uint16_t type_field = get_u16(header + 6);
  const bool tagged = (type_field & kTaggedBit) != 0;
  const std::uint16_t type = static_cast<std::uint16_t>(type_field & ~kTaggedBit);
  if (type == 0 || type > kLastType) throw ProtocolError(fmt::format("unknown rendezvous message type {}", type));
  std::uint32_t length = get_u32(header + 8);
  if (length > kMaxPayloadBytes) {
    throw ProtocolError(fmt::format("a {} message announces {} bytes, more than the limit of {} bytes",
                                    type_name(static_cast<MessageType>(type)), length, kMaxPayloadBytes));
  }
  const std::size_t tag_bytes = tagged ? kTagBytes : 0;
  if (available < kHeaderBytes + length + tag_bytes) return std::nullopt;

  Message message;
  message.type = static_cast<MessageType>(type);
  const unsigned char* p = header + kHeaderBytes;
  const unsigned char* end = p + length;
  auto truncated = [&](const char* what) {
    return ProtocolError(fmt::format("malformed {} message: {} runs past the end of its {} bytes",
                                     type_name(message.type), what, length));
  };
  if (end - p < 2) throw truncated("the field count");
  std::uint16_t count = get_u16(p);
  p += 2;
  for (std::uint16_t index = 0; index < count; ++index) {
    if (end - p < 2) throw truncated("a field name length");
    std::uint16_t name_length = get_u16(p);
    p += 2;
    if (end - p < name_length) throw truncated("a field name");
    std::string name(reinterpret_cast<const char*>(p), name_length);
    p += name_length;
    if (end - p < 4) throw truncated("a value length");
    std::uint32_t value_length = get_u32(p);
    p += 4;
    if (static_cast<std::uint32_t>(end - p) < value_length) throw truncated(("the value of '" + name + "'").c_str());
    message.fields[name] = std::string(reinterpret_cast<const char*>(p), value_length);
    p += value_length;
  }
  if (p != end) {
    throw ProtocolError(fmt::format("malformed {} message: {} bytes left after its {} fields", type_name(message.type),
                                    end - p, count));
  }
  Frame frame{std::move(message), std::string(start, kHeaderBytes + length),
              std::string(start + kHeaderBytes + length, tag_bytes)};
  consumed_ += kHeaderBytes + length + tag_bytes;
  return frame;
}

// ---- typed messages ------------------------------------------------------------------------

Message JoinRequest::to_message() const {
  Message m = Message::of(MessageType::kJoin);
  m.set("version", version).set("node_rank", node_rank).set("hostname", hostname).set("agent_id", agent_id);
  m.set("nproc", nproc)
      .set("role", role)
      .set("nnodes", nnodes)
      .set("run_id", run_id)
      .set("run_id_generated", run_id_generated);
  m.set("max_restarts", max_restarts).set("allow_uneven_nproc", allow_uneven_nproc);
  m.set("config_hash", config_hash).set("config_lines", config_lines).set("cpu_sharing", cpu_sharing);
  m.set("replica_port", replica_port);
  return m;
}

JoinRequest JoinRequest::from(const Message& m) {
  JoinRequest join;
  join.version = m.text("version");
  join.node_rank = static_cast<int>(m.integer("node_rank"));
  join.hostname = m.text("hostname");
  join.agent_id = m.text("agent_id");
  join.nproc = static_cast<int>(m.integer("nproc"));
  join.role = m.text("role");
  join.nnodes = m.text("nnodes");
  join.run_id = m.text("run_id");
  join.run_id_generated = m.flag("run_id_generated");
  join.max_restarts = static_cast<int>(m.integer("max_restarts"));
  join.allow_uneven_nproc = m.flag("allow_uneven_nproc");
  join.config_hash = m.text("config_hash");
  join.config_lines = m.text("config_lines");
  join.cpu_sharing = m.text("cpu_sharing");
  join.replica_port = static_cast<int>(m.integer("replica_port"));
  if (join.replica_port < 0 || join.replica_port > 65535)
    throw ProtocolError(fmt::format("join message with replica_port {}", join.replica_port));
  if (join.nproc < 1) throw ProtocolError(fmt::format("join message with nproc {}", join.nproc));
  return join;
}

int Assignment::world_size() const { return first_rank(nnodes()); }

int Assignment::first_rank(int node) const {
  int rank = 0;
  for (int index = 0; index < node && index < nnodes(); ++index) rank += nproc_per_node[index];
  return rank;
}

Message Assignment::to_message() const {
  Message m = Message::of(MessageType::kAssign);
  std::string counts;
  for (std::size_t index = 0; index < nproc_per_node.size();) {
    std::size_t run = 1;
    while (index + run < nproc_per_node.size() && nproc_per_node[index + run] == nproc_per_node[index]) ++run;
    counts += (counts.empty() ? "" : ",") + std::to_string(nproc_per_node[index]) +
              (run > 1 ? "*" + std::to_string(run) : "");
    index += run;
  }
  m.set("round", round).set("restart_count", restart_count).set("node_rank", node_rank).set("nproc_per_node", counts);
  m.set("node_name", node_name).set("master_addr", master_addr).set("master_port", master_port);
  m.set("run_id", run_id).set("max_restarts", max_restarts);
  m.set("role_first_rank", role_first_rank).set("role_world_size", role_world_size);
  m.set("workers_sharing_cpus", workers_sharing_cpus);
  m.set("buddy_host", buddy_host).set("buddy_port", buddy_port).set("buddy_name", buddy_name);
  return m;
}

Assignment Assignment::from(const Message& m) {
  Assignment a;
  a.round = static_cast<int>(m.integer("round"));
  a.restart_count = static_cast<int>(m.integer("restart_count"));
  a.node_rank = static_cast<int>(m.integer("node_rank"));
  const std::string& counts = m.text("nproc_per_node");
  auto bad = [&]() { return ProtocolError("assign message: bad nproc_per_node '" + counts.substr(0, 64) + "'"); };
  for (const std::string& item : split_list(counts, ',')) {
    std::size_t star = item.find('*');
    auto count = parse_int(item.substr(0, star));
    auto run = star == std::string::npos ? decltype(count)(1) : parse_int(item.substr(star + 1));
    if (!count || *count < 1 || *count > (1 << 20) || !run || *run < 1 ||
        *run > kMaxAssignedNodes - static_cast<long long>(a.nproc_per_node.size())) {
      throw bad();
    }
    a.nproc_per_node.insert(a.nproc_per_node.end(), static_cast<std::size_t>(*run), static_cast<int>(*count));
  }
  a.node_name = m.text("node_name");
  a.master_addr = m.text("master_addr");
  a.master_port = static_cast<int>(m.integer("master_port"));
  a.run_id = m.text("run_id");
  a.max_restarts = static_cast<int>(m.integer("max_restarts"));
  a.role_first_rank = static_cast<int>(m.integer("role_first_rank"));
  a.role_world_size = static_cast<int>(m.integer("role_world_size"));
  a.workers_sharing_cpus = static_cast<int>(m.integer("workers_sharing_cpus"));
  a.buddy_host = m.text("buddy_host");
  a.buddy_port = static_cast<int>(m.integer("buddy_port"));
  a.buddy_name = m.text("buddy_name");
  if (a.buddy_port < 0 || a.buddy_port > 65535)
    throw ProtocolError(fmt::format("assign message: buddy port {}", a.buddy_port));
  if (a.round < 0 || a.restart_count < 0 || a.restart_count > a.round) {
    throw ProtocolError(fmt::format("assign message: restart count {} in round {}", a.restart_count, a.round));
  }
  if (a.nproc_per_node.empty() || a.node_rank < 0 || a.node_rank >= a.nnodes()) {
    throw ProtocolError(fmt::format("assign message: node rank {} of {} nodes", a.node_rank, a.nnodes()));
  }
  long long workers = 0;  // summed wide: world_size() and first_rank() add ints
  for (int count : a.nproc_per_node) workers += count;
  if (workers > std::numeric_limits<int>::max()) {
    throw ProtocolError(fmt::format("assign message: {} workers, more than a rank can count", workers));
  }
  const long long nproc = a.nproc_per_node[a.node_rank];
  if (a.role_first_rank < 0 || a.role_first_rank + nproc > a.role_world_size || a.role_world_size > workers) {
    throw ProtocolError(fmt::format("assign message: role ranks {} to {} of {} in a job of {} workers",
                                    a.role_first_rank, a.role_first_rank + nproc - 1, a.role_world_size, workers));
  }
  if (a.workers_sharing_cpus < nproc || a.workers_sharing_cpus > workers) {
    throw ProtocolError(fmt::format("assign message: {} workers share the CPUs of a node of {} in a job of {}",
                                    a.workers_sharing_cpus, nproc, workers));
  }
  return a;
}

std::vector<int> workers_sharing_cpus(const std::vector<std::string>& keys, const std::vector<int>& nproc_per_node) {
  std::map<std::string, int> sharing;
  for (std::size_t node = 0; node < keys.size(); ++node) {
    if (!keys[node].empty()) sharing[keys[node]] += nproc_per_node.at(node);
  }
  std::vector<int> workers(keys.size());
  for (std::size_t node = 0; node < keys.size(); ++node)
    workers[node] = keys[node].empty() ? nproc_per_node[node] : sharing[keys[node]];
  return workers;
}

std::vector<RoleRanks> role_ranks(const std::vector<std::string>& roles, const std::vector<int>& nproc_per_node) {
  std::map<std::string, int> sizes;
  for (std::size_t node = 0; node < roles.size(); ++node) sizes[roles[node]] += nproc_per_node.at(node);
  std::map<std::string, int> next;
  std::vector<RoleRanks> ranks(roles.size());
  for (std::size_t node = 0; node < roles.size(); ++node) {
    int& first = next[roles[node]];
    ranks[node] = RoleRanks{first, sizes[roles[node]]};
    first += nproc_per_node[node];
  }
  return ranks;
}

std::string NodeFailure::summary() const {
  if (node_lost) return fmt::format("{}: {}", node, outcome);
  return fmt::format("rank {} (local rank {}) on {}: {}", global_rank, local_rank, node, outcome);
}

ExitStatus NodeFailure::status() const {
  return signal > 0 ? ExitStatus::killed_by(signal) : ExitStatus::exited(exit_code);
}

void NodeFailure::write_to(Message& m, const std::string& p) const {
  m.set(p + "round", round).set(p + "node_rank", node_rank).set(p + "node", node).set(p + "host", host);
  m.set(p + "node_lost", node_lost).set(p + "global_rank", global_rank).set(p + "local_rank", local_rank);
  m.set(p + "pid", static_cast<long long>(pid)).set(p + "exit_code", exit_code).set(p + "signal", signal);
  m.set(p + "hung", hung).set(p + "silent_s", silent_s).set(p + "outcome", outcome).set(p + "time", time_utc);
  m.set(p + "stderr_log", stderr_log).set(p + "stderr_tail", fmt::format("{}", fmt::join(stderr_tail, "\n")));
  m.set(p + "error_message", error_message).set(p + "waiting", waiting).set(p + "last_progress_ms", last_progress_ms);
  m.set(p + "last_step", has_last_step ? std::to_string(last_step) : "").set(p + "stopped", process_stopped);
  m.set(p + "stacks", stacks).set(p + "top_frames", fmt::format("{}", fmt::join(top_frames, "\n")));
}

NodeFailure NodeFailure::read_from(const Message& m, const std::string& p) {
  NodeFailure f;
  f.round = static_cast<int>(m.integer(p + "round"));
  f.node_rank = static_cast<int>(m.integer(p + "node_rank"));
  f.node = m.text(p + "node");
  f.host = m.text(p + "host");
  f.node_lost = m.flag(p + "node_lost");
  f.global_rank = static_cast<int>(m.integer(p + "global_rank"));
  f.local_rank = static_cast<int>(m.integer(p + "local_rank"));
  f.pid = static_cast<long>(m.integer(p + "pid"));
  f.exit_code = static_cast<int>(m.integer(p + "exit_code"));
  f.signal = static_cast<int>(m.integer(p + "signal"));
  f.hung = m.flag(p + "hung");
  f.silent_s = m.number(p + "silent_s");
  f.outcome = m.text(p + "outcome");
  f.time_utc = m.text(p + "time");
  f.stderr_log = m.text(p + "stderr_log");
  f.stderr_tail = split_list(m.text(p + "stderr_tail"), '\n');
  f.error_message = m.text(p + "error_message");
  f.waiting = m.flag(p + "waiting");
  f.last_progress_ms = m.integer(p + "last_progress_ms");
  f.has_last_step = !m.text(p + "last_step").empty();
  if (f.has_last_step) f.last_step = m.integer(p + "last_step");
  f.process_stopped = m.flag(p + "stopped");
  f.stacks = m.text(p + "stacks");
  f.top_frames = split_list(m.text(p + "top_frames"), '\n');
  return f;
}

void write_failures(Message& message, const std::string& prefix, const std::vector<NodeFailure>& failures, int limit) {
  const int count = std::min(static_cast<int>(failures.size()), limit);
  message.set(prefix + "count", count);
  message.set(prefix + "left_out", static_cast<int>(failures.size()) - count);
  for (int index = 0; index < count; ++index) failures[index].write_to(message, fmt::format("{}{}.", prefix, index));
}

std::vector<NodeFailure> read_failures(const Message& message, const std::string& prefix, int limit) {
  const long long count = message.integer(prefix + "count");
  if (count < 0 || count > limit) {
    throw ProtocolError(
        fmt::format("{} message lists {} ranks; 0 to {} expected", type_name(message.type), count, limit));
  }
  std::vector<NodeFailure> failures;
  for (long long index = 0; index < count; ++index) {
    failures.push_back(NodeFailure::read_from(message, fmt::format("{}{}.", prefix, index)));
  }
  return failures;
}

Message workers_failed_message(const NodeFailure& failure) {
  Message m = Message::of(MessageType::kWorkersFailed);
  m.set("round", failure.round);
  failure.write_to(m, "cause.");
  return m;
}

Message workers_ended_message(int round, const std::string& outcome, int exit_code) {
  return Message::of(MessageType::kWorkersEnded)
      .set("round", round)
      .set("outcome", outcome)
      .set("exit_code", exit_code);
}

Message stop_message(int round, const std::string& reason) {
  return Message::of(MessageType::kStop).set("round", round).set("reason", reason);
}

Message regroup_message(int round, int nodes, const std::string& reason) {
  return Message::of(MessageType::kRegroup).set("round", round).set("nodes", nodes).set("reason", reason);
}

Message finish_message(int exit_code, const std::string& text, const std::optional<NodeFailure>& root_cause) {
  Message m = Message::of(MessageType::kFinish);
  m.set("exit_code", exit_code).set("text", text).set("has_cause", root_cause.has_value());
  if (root_cause) root_cause->write_to(m, "cause.");
  return m;
}

Message reject_message(int exit_code, const std::string& text) {
  return Message::of(MessageType::kReject).set("exit_code", exit_code).set("text", text);
}

Message wait_message(const std::string& text) { return Message::of(MessageType::kWait).set("text", text); }

Message leave_message(int exit_code, const std::string& reason) {
  return Message::of(MessageType::kLeave).set("exit_code", exit_code).set("reason", reason);
}

Message heartbeat_message() { return Message::of(MessageType::kHeartbeat); }

Message hello_message(const std::string& nonce, bool authenticated) {
  return Message::of(MessageType::kHello).set("nonce", nonce).set("auth", authenticated ? kAuthHmac : kAuthNone);
}

}  // namespace mgtrain::rdzv
