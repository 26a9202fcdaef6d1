// Stacks on demand across nodes: the messages and the server's side (see stacks_across_nodes.hpp).
#include "multinode/stacks_across_nodes.hpp"
#include "wire/node_status.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "util/strings.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::rdzv {
namespace {

// One line of an answer: control characters escaped (a frame or note is one line), at most kMaxStacksLineBytes, cut
// at a character and marked.
std::string bounded_line(const std::string& text) {
  return cut_with_ellipsis(escape_control_characters(text), kMaxStacksLineBytes);
}

std::string joined_lines(const std::vector<std::string>& lines, int most) {
  std::string text;
  const int count = std::min(static_cast<int>(lines.size()), most);
  for (int i = 0; i < count; ++i) text += (i ? "\n" : "") + bounded_line(lines[i]);
  return text;
}

std::vector<std::string> read_lines(const Message& message, const std::string& name, int most) {
  std::vector<std::string> lines = split_lines(message.text(name));
  if (static_cast<int>(lines.size()) > most)
    throw ProtocolError(fmt::format("stacks-dumped message: {} has {} lines (at most {})", name, lines.size(), most));
  for (const std::string& line : lines) {
    if (line.size() > kMaxStacksLineBytes)
      throw ProtocolError(fmt::format("stacks-dumped message: a line of {} is {} bytes long", name, line.size()));
  }
  return lines;
}

const char* outcome_name(NodeStacksOutcome outcome) {
  switch (outcome) {
    case NodeStacksOutcome::kDumped:
      return "dumped";
    case NodeStacksOutcome::kBusy:
      return "busy";
    case NodeStacksOutcome::kNotRunning:
      return "not_running";
  }
  return "dumped";
}

}  // namespace

Message dump_stacks_message(int round, int request, double timeout_s) {
  return Message::of(MessageType::kDumpStacks).set("round", round).set("request", request).set("timeout", timeout_s);
}

Message NodeStacks::to_message() const {
  Message m = Message::of(MessageType::kStacksDumped);
  m.set("request", request)
      .set("round", round)
      .set("node_rank", node_rank)
      .set("host", bounded_line(host))
      .set("outcome", outcome_name(outcome))
      .set("message", bounded_line(message))
      .set("attempt", attempt)
      .set("time", time)
      .set("seconds", seconds);
  const int count = std::min(static_cast<int>(ranks.size()), kMaxStacksRanks);
  m.set("count", count).set("left_out", ranks_left_out + static_cast<int>(ranks.size()) - count);
  for (int i = 0; i < count; ++i) {
    const RankStacksRow& r = ranks[static_cast<std::size_t>(i)];
    const std::string prefix = fmt::format("rank.{}.", i);
    m.set(prefix + "facts",
          fmt::format("{} {} {} {} {} {} {}", r.rank, r.local_rank, r.pid, r.outcome.empty() ? "-" : r.outcome,
                      r.python_frames ? 1 : 0, r.native_frames ? 1 : 0, format_number(r.seconds)));
    m.set(prefix + "file", bounded_line(r.stacks_file));
    m.set(prefix + "frames", joined_lines(r.top_frames, kMaxStacksLines));
    m.set(prefix + "notes", joined_lines(r.notes, kMaxStacksNotes));
  }
  return m;
}

NodeStacks NodeStacks::from(const Message& message) {
  NodeStacks stacks;
  stacks.request = static_cast<int>(message.integer("request"));
  stacks.round = static_cast<int>(message.integer("round"));
  stacks.node_rank = static_cast<int>(message.integer("node_rank"));
  stacks.host = message.text("host");
  const std::string& outcome = message.text("outcome");
  if (outcome == "dumped") {
    stacks.outcome = NodeStacksOutcome::kDumped;
  } else if (outcome == "busy") {
    stacks.outcome = NodeStacksOutcome::kBusy;
  } else if (outcome == "not_running") {
    stacks.outcome = NodeStacksOutcome::kNotRunning;
  } else {
    throw ProtocolError("stacks-dumped message: outcome '" + bounded_line(outcome) + "'");
  }
  stacks.message = message.text("message");
  stacks.attempt = static_cast<int>(message.integer("attempt"));
  stacks.time = message.number("time");
  stacks.seconds = message.number("seconds");
  const long long count = message.integer("count");
  const long long left_out = message.integer("left_out");
  if (count < 0 || count > kMaxStacksRanks || left_out < 0 || left_out > kMaxStatusRanks)
    throw ProtocolError(fmt::format("stacks-dumped message: {} ranks and {} left out (at most {} and {})", count,
                                    left_out, kMaxStacksRanks, kMaxStatusRanks));
  stacks.ranks_left_out = static_cast<int>(left_out);
  for (long long i = 0; i < count; ++i) {
    const std::string prefix = fmt::format("rank.{}.", i);
    const std::vector<std::string> f = split(message.text(prefix + "facts"), ' ');
    RankStacksRow row;
    const auto integer = [&](std::size_t index, const char* what) {
      const std::optional<std::int64_t> value = index < f.size() ? parse_int(f[index]) : std::nullopt;
      if (!value) throw ProtocolError(fmt::format("stacks-dumped message: {} of {} is no integer", what, prefix));
      return *value;
    };
    if (f.size() != 7)
      throw ProtocolError(fmt::format("stacks-dumped message: {}facts has {} fields, not 7", prefix, f.size()));
    row.rank = static_cast<int>(integer(0, "the rank"));
    row.local_rank = static_cast<int>(integer(1, "the local rank"));
    row.pid = static_cast<long>(integer(2, "the pid"));
    row.outcome = f[3] == "-" ? std::string() : f[3];
    if (!row.outcome.empty() && row.outcome != "complete" && row.outcome != "partial" && row.outcome != "failed")
      throw ProtocolError("stacks-dumped message: a rank's outcome '" + bounded_line(f[3]) + "'");
    row.python_frames = integer(4, "python_frames") != 0;
    row.native_frames = integer(5, "native_frames") != 0;
    const std::optional<double> seconds = parse_number(f[6]);
    if (!seconds) throw ProtocolError("stacks-dumped message: seconds of " + prefix + " is no number");
    row.seconds = *seconds;
    row.stacks_file = message.text(prefix + "file");
    if (row.stacks_file.size() > kMaxStacksLineBytes) throw ProtocolError("stacks-dumped message: a path too long");
    row.top_frames = read_lines(message, prefix + "frames", kMaxStacksLines);
    row.notes = read_lines(message, prefix + "notes", kMaxStacksNotes);
    stacks.ranks.push_back(std::move(row));
  }
  return stacks;
}

// ---- the server's side -------------------------------------------------------------------------

std::optional<StacksRefusal> JobStacksRequest::start(int round, double timeout_s, SteadyTime now) {
  if (deadline_)
    return StacksRefusal{true, "the job's stacks are being dumped now (another request); ask again when that is done"};
  std::vector<NodeTable::Node*> asked;
  for (NodeTable::Node* node : nodes_.members()) {
    if (!node->ended) asked.push_back(node);
  }
  if (asked.empty()) return StacksRefusal{false, "no node of the job runs workers now"};
  request_ = next_request_++;
  round_ = round;
  timeout_s_ = timeout_s;
  started_ = now;
  last_answer_ = now;
  deadline_ = now + steady_seconds(timeout_s + kStacksSlackS);
  owing_.clear();
  answers_.clear();
  gone_.clear();
  const Message ask = dump_stacks_message(round, request_, timeout_s);
  for (NodeTable::Node* node : asked) {
    owing_[node->id] = nodes_.describe(*node);
    nodes_.send(*node, ask, now);
  }
  return std::nullopt;
}

void JobStacksRequest::answered(const NodeTable::Node& node, NodeStacks stacks, SteadyTime now) {
  auto owing = owing_.find(node.id);
  if (!deadline_ || owing == owing_.end() || stacks.request != request_ || stacks.round != round_) return;
  owing_.erase(owing);
  last_answer_ = now;
  stacks.node_rank = node.node_rank;  // the server's name for it, whatever the answer says
  answers_[node.node_rank] = std::move(stacks);
}

void JobStacksRequest::forget(ConnectionId connection) {
  auto owing = owing_.find(connection);
  if (owing == owing_.end()) return;
  gone_.push_back(owing->second + ": gone before it answered");
  owing_.erase(owing);
}

std::optional<JobStacks> JobStacksRequest::take(SteadyTime now) {
  if (!deadline_ || (!owing_.empty() && now < *deadline_)) return std::nullopt;
  JobStacks job;
  job.round = round_;
  job.seconds = seconds_between(started_, owing_.empty() ? last_answer_ : now);
  for (auto& [node_rank, stacks] : answers_) job.nodes.push_back(std::move(stacks));
  job.unanswered = std::move(gone_);
  for (const auto& [connection, name] : owing_)
    job.unanswered.push_back(name + ": no answer within " + format_seconds(timeout_s_ + kStacksSlackS));
  deadline_.reset();
  owing_.clear();
  answers_.clear();
  gone_.clear();
  return job;
}

}  // namespace mgtrain::rdzv
