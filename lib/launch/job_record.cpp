// The job's run.json on the rendezvous host (see job_record.hpp): its rounds as run.json keeps them, each
// recovery's console line, and the record opened and rewritten as the rounds change.
#include "launch/job_record.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "util/log.hpp"
#include "util/time_format.hpp"

namespace mgtrain {

// The rendezvous' rounds as run.json keeps them: steady times become Unix seconds by their distance from now.
std::vector<RoundEntry> round_entries(const std::vector<rdzv::RoundRecord>& rounds) {
  const auto now = rdzv::SteadyTime::clock::now();
  const double unix_now = unix_seconds_now();
  const auto unix_of = [&](rdzv::SteadyTime when) {
    return unix_now - std::chrono::duration<double>(now - when).count();
  };
  std::vector<RoundEntry> entries;
  for (const rdzv::RoundRecord& round : rounds) {
    RoundEntry entry;
    entry.round = round.round;
    entry.restart_count = round.restart_count;
    entry.started_by = round.started_by;
    entry.start = unix_of(round.start);
    if (round.end) entry.end = unix_of(*round.end);
    entry.world_size = round.world_size;
    for (const rdzv::RoundRecord::Member& member : round.members) {
      entry.nodes.push_back({member.node_rank, member.host, member.address, member.first_rank, member.nproc});
    }
    entry.ended_by = round.ended_by;
    entry.cause = round.cause;
    entries.push_back(std::move(entry));
  }
  // A failure's or a regroup's recovery, once the next round started: each phase in seconds from the fault.
  for (std::size_t index = 0; index + 1 < rounds.size(); ++index) {
    const rdzv::RoundRecord& failed = rounds[index];
    const rdzv::RoundRecord& next = rounds[index + 1];
    if (failed.ended_by != "failure" && failed.ended_by != "regroup") continue;
    RoundEntry::Recovery recovery;
    const std::optional<long long> fault_ms = parse_utc_millis(failed.fault_utc);
    recovery.fault = fault_ms ? static_cast<double>(*fault_ms) / 1000.0
                              : unix_of(failed.detected.value_or(failed.end.value_or(next.start)));
    const auto from_fault = [&](std::optional<rdzv::SteadyTime> when) -> std::optional<double> {
      if (!when) return std::nullopt;
      return std::max(0.0, unix_of(*when) - recovery.fault);
    };
    recovery.detected_s = from_fault(failed.detected);
    recovery.stopped_s = from_fault(failed.stopped);
    recovery.rendezvous_s = from_fault(next.start);
    recovery.first_step_s = from_fault(next.first_step);
    recovery.last_step = failed.last_step;
    recovery.resumed_step = next.resumed_step;
    recovery.resumed_step_exact = next.resumed_step_exact;
    recovery.resumed_from = next.resumed_from;
    if (recovery.last_step && recovery.resumed_step) {
      recovery.steps_lost = std::max(0LL, *recovery.last_step - *recovery.resumed_step);
    }
    entries[index].recovery = recovery;
  }
  return entries;
}

// " (a snapshot in memory)", " (a checkpoint file)" or "": what the workers said they resumed from.
std::string resumed_copy(const RoundEntry::Recovery& r) {
  if (r.resumed_from == StartSource::kSnapshot) return " (a snapshot in memory)";
  if (r.resumed_from == StartSource::kCheckpoint) return " (a checkpoint file)";
  return "";
}

// "mgtrain: recovery from round 0's failure (rank 3 ...): detected +0.4 s, workers stopped +1.2 s, rendezvous +1.3 s,
// first step +3.1 s after the fault; 37 steps lost (step 1240 reached, resumed from 1203)".
std::string recovery_line(const RoundEntry& round) {
  const RoundEntry::Recovery& r = *round.recovery;
  const auto at = [](const std::optional<double>& seconds) {
    return seconds ? fmt::format("+{:.2f} s", *seconds) : std::string("?");
  };
  std::string line = fmt::format(
      "mgtrain: recovery from round {}'s {}{}: failure detected {}, workers stopped {}, "
      "rendezvous complete {}, first step {} after the fault",
      round.round, round.ended_by == "regroup" ? "regroup" : "failure",
      round.cause.empty() ? "" : " (" + round.cause + ")", at(r.detected_s), at(r.stopped_s), at(r.rendezvous_s),
      at(r.first_step_s));
  if (r.steps_lost && *r.steps_lost > 0) {
    line += fmt::format("; {} step{} lost (step {} reached, resumed from {}{}{})", *r.steps_lost,
                        *r.steps_lost == 1 ? "" : "s", *r.last_step, *r.resumed_step, resumed_copy(r),
                        r.resumed_step_exact ? "" : ", estimated: the workers do not say where they resume");
  } else if (r.steps_lost) {
    line += fmt::format("; no step lost: resumed from step {}{}, the newest step reported before the fault was {}",
                        *r.resumed_step, resumed_copy(r), *r.last_step);
  }
  return line;
}

JobRecord::JobRecord(const LaunchPlan& plan, std::optional<RunRecorder>& record) : plan_(plan), record_(record) {}

void JobRecord::update(const std::vector<rdzv::RoundRecord>& rounds, const std::string& run_id) {
  if (rounds.empty() || run_id.empty()) return;
  const std::string signature =
      std::to_string(rounds.size()) + rounds.back().ended_by + (rounds.back().first_step ? "+" : "");
  if (signature == signature_) return;
  signature_ = signature;
  if (!record_) {
    const std::string run_dir = std::filesystem::path(plan_.run_dir).parent_path().string() + "/" + run_id;
    std::filesystem::create_directories(run_dir);
    keep_earlier_run_record(run_dir, "");
    record_.emplace(run_dir, start_run_record(run_id, {plan_.hostname}, plan_.nnodes, plan_.world_size));
  }
  std::vector<RoundEntry> entries = round_entries(rounds);
  for (std::size_t index = announced_; index < entries.size(); ++index) {  // each recovery once, when complete
    if (!entries[index].recovery || !entries[index].recovery->first_step_s) break;
    log::text(recovery_line(entries[index]) + "\n");
    announced_ = index + 1;
  }
  write_replication();
  const std::string warning = record_->set_rounds(std::move(entries));
  if (!warning.empty()) log::text(warning + "\n");
}

NodeReplication node_replication(const rdzv::NodeStatus& node, double time) {
  const rdzv::ReplicaStatus& r = node.replication.value();
  NodeReplication replication{node.node_rank, node.host,   r.buddy,     r.connected, r.sent, r.skipped,
                              r.bytes_sent,   r.sent_step, r.sent_time, r.received,  {},     time};
  for (const rdzv::ReplicaStatus::Held& held : r.held) replication.held.push_back({held.rank, held.step, held.time});
  return replication;
}

void JobRecord::note_replication(const std::vector<rdzv::NodeStatus>& nodes) {
  const double now = unix_seconds_now();
  for (const rdzv::NodeStatus& node : nodes) {
    if (node.replication) replication_[{node.node_rank, node.host}] = node_replication(node, now);
  }
}

void JobRecord::write_replication() {
  if (!record_ || replication_.empty()) return;
  std::vector<NodeReplication> records;
  records.reserve(replication_.size());
  for (const auto& [key, record] : replication_) records.push_back(record);
  const std::string warning = record_->set_replication(std::move(records));
  if (!warning.empty()) log::text(warning + "\n");
}

}  // namespace mgtrain
