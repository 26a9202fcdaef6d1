// A node's status report on the wire (see node_status.hpp).
#include "wire/node_status.hpp"

#include <cmath>
#include <type_traits>

#include <fmt/format.h>

#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::rdzv {

// ---- node status: one line per rank, "rank local pid state step loss beat cpu rss rate straggler progress busy
// start",
// '-' for unknown

namespace {

template <typename T>
std::string or_dash(const std::optional<T>& value) {
  if (!value) return "-";
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(*value)) return "-";  // a diverged loss is unknown here, never a bad frame
    return fmt::format("{:.17g}", *value);
  }
  return std::to_string(*value);
}

template <typename T>
std::optional<T> parse_optional(const std::string& text, const char* what) {
  if (text == "-") return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    const std::optional<double> value = parse_number(text);
    if (!value) throw ProtocolError(fmt::format("node-status message: {} '{}' is not a number", what, text));
    return *value;
  } else {
    const std::optional<std::int64_t> value = parse_int(text);
    if (!value) throw ProtocolError(fmt::format("node-status message: {} '{}' is not an integer", what, text));
    return static_cast<T>(*value);
  }
}

}  // namespace

constexpr std::size_t kRankRowFields = 17;

Message NodeStatus::to_message() const {
  std::string lines;
  for (const RankRow& r : ranks) {
    lines += fmt::format(
        "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}\n", r.rank, r.local_rank, r.pid, r.state, or_dash(r.step),
        or_dash(r.loss), or_dash(r.beat_time), or_dash(r.cpu_percent), or_dash(r.rss_bytes), or_dash(r.step_rate),
        r.straggler ? 1 : 0, or_dash(r.progress_time), or_dash(r.busy), or_dash(r.start_step),
        r.start_source ? start_source_name(*r.start_source) : "-", or_dash(r.snapshot_step), or_dash(r.snapshot_time));
  }
  Message m = Message::of(MessageType::kNodeStatus)
                  .set("round", round)
                  .set("node_rank", node_rank)
                  .set("host", host)
                  .set("count", static_cast<int>(ranks.size()))
                  .set("ranks", lines);
  if (replication) {
    const ReplicaStatus& r = *replication;
    std::string held;
    for (const ReplicaStatus::Held& h : r.held) held += fmt::format("{} {} {}\n", h.rank, h.step, h.time);
    m.set("replica.buddy", r.buddy).set("replica.connected", r.connected).set("replica.sent", r.sent);
    m.set("replica.skipped", r.skipped).set("replica.bytes_sent", r.bytes_sent);
    m.set("replica.sent_step", or_dash(r.sent_step)).set("replica.sent_time", or_dash(r.sent_time));
    m.set("replica.received", r.received).set("replica.held", held);
  }
  return m;
}

namespace {

ReplicaStatus read_replica_status(const Message& m) {
  ReplicaStatus r;
  r.buddy = m.text("replica.buddy");
  r.connected = m.flag("replica.connected");
  r.sent = m.integer("replica.sent");
  r.skipped = m.integer("replica.skipped");
  r.bytes_sent = m.integer("replica.bytes_sent");
  r.sent_step = parse_optional<long long>(m.text("replica.sent_step"), "replica sent step");
  r.sent_time = parse_optional<double>(m.text("replica.sent_time"), "replica sent time");
  r.received = m.integer("replica.received");
  std::vector<std::string> lines = split_lines(m.text("replica.held"));
  if (lines.size() > static_cast<std::size_t>(kMaxStatusRanks)) {
    throw ProtocolError(
        fmt::format("node-status message: {} replicas held (at most {})", lines.size(), kMaxStatusRanks));
  }
  for (const std::string& line : lines) {
    const std::vector<std::string> f = split(line, ' ');
    const std::optional<long long> rank =
        f.size() == 3 ? parse_optional<long long>(f[0], "replica rank") : std::nullopt;
    const std::optional<long long> step =
        f.size() == 3 ? parse_optional<long long>(f[1], "replica step") : std::nullopt;
    const std::optional<double> time = f.size() == 3 ? parse_optional<double>(f[2], "replica time") : std::nullopt;
    if (!rank || !step || !time || *rank < 0 || *rank > (1 << 24)) {
      throw ProtocolError("node-status message: replica line '" + line.substr(0, 80) + "' is not 'rank step time'");
    }
    r.held.push_back({static_cast<int>(*rank), *step, *time});
  }
  return r;
}

}  // namespace

NodeStatus NodeStatus::from(const Message& message) {
  NodeStatus status;
  status.round = static_cast<int>(message.integer("round"));
  status.node_rank = static_cast<int>(message.integer("node_rank"));
  status.host = message.text("host");
  const long long count = message.integer("count");
  if (count < 0 || count > kMaxStatusRanks) {
    throw ProtocolError(fmt::format("node-status message: {} ranks (at most {})", count, kMaxStatusRanks));
  }
  std::vector<std::string> lines = split_lines(message.text("ranks"));
  if (static_cast<long long>(lines.size()) != count) {
    throw ProtocolError(fmt::format("node-status message: count {} but {} rank lines", count, lines.size()));
  }
  for (const std::string& line : lines) {
    const std::vector<std::string> f = split(line, ' ');
    if (f.size() != kRankRowFields)
      throw ProtocolError(fmt::format("node-status message: rank line '{}' has {} fields, not {}", line.substr(0, 80),
                                      f.size(), kRankRowFields));
    RankRow row;
    const auto integer = [](const std::string& text, const char* what) {
      const std::optional<long long> value = parse_optional<long long>(text, what);
      if (!value) throw ProtocolError(fmt::format("node-status message: no {}", what));
      return *value;
    };
    row.rank = static_cast<int>(integer(f[0], "rank"));
    row.local_rank = static_cast<int>(integer(f[1], "local rank"));
    row.pid = static_cast<long>(integer(f[2], "pid"));
    if (f[3] != "running" && f[3] != "exited")
      throw ProtocolError("node-status message: state '" + f[3].substr(0, 20) + "'");
    row.state = f[3];
    row.step = parse_optional<long long>(f[4], "step");
    row.loss = parse_optional<double>(f[5], "loss");
    row.beat_time = parse_optional<double>(f[6], "heartbeat time");
    row.cpu_percent = parse_optional<double>(f[7], "CPU %");
    row.rss_bytes = parse_optional<long long>(f[8], "RSS");
    row.step_rate = parse_optional<double>(f[9], "step rate");
    if (f[10] != "0" && f[10] != "1")
      throw ProtocolError("node-status message: straggler flag '" + f[10].substr(0, 20) + "'");
    row.straggler = f[10] == "1";
    row.progress_time = parse_optional<double>(f[11], "progress time");
    row.busy = parse_optional<double>(f[12], "busy seconds");
    row.start_step = parse_optional<long long>(f[13], "start step");
    if (f[14] != "-") {
      row.start_source = parse_start_source(f[14]);
      if (!row.start_source) throw ProtocolError("node-status message: start source '" + f[14].substr(0, 20) + "'");
    }
    row.snapshot_step = parse_optional<long long>(f[15], "snapshot step");
    row.snapshot_time = parse_optional<double>(f[16], "snapshot time");
    status.ranks.push_back(std::move(row));
  }
  if (message.has("replica.buddy")) status.replication = read_replica_status(message);
  return status;
}

}  // namespace mgtrain::rdzv
