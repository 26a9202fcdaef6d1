// The agents' lines on the --hosts launcher's console, merged across hosts (see hosts_console.hpp).
#include "hosts/hosts_console.hpp"

#include <algorithm>
#include <limits>

#include "supervise/launch_plan.hpp"

namespace mgtrain {

JobRanks job_ranks(const std::vector<HostSlots>& hosts, const NprocSpec& nproc) {
  JobRanks ranks;
  for (const HostSlots& host : hosts) {
    if (host.slots > 0) {
      ranks.count += host.slots;
    } else if (nproc.is_count()) {
      ranks.count += nproc.count;
    } else {
      ranks.count += 1;  // auto, gpu or cpu: decided on the host
      ranks.exact = false;
    }
  }
  return ranks;
}

bool hosts_console_dedup_on(ConsoleDedupMode mode, Personality personality, const JobRanks& ranks) {
  if (mode != ConsoleDedupMode::Auto) return mode == ConsoleDedupMode::On;
  return personality == Personality::Mgtrain && ranks.count >= kConsoleDedupAutoRanks;
}

namespace {

int clamped(std::int64_t count) {
  return static_cast<int>(std::min<std::int64_t>(count, std::numeric_limits<int>::max()));
}

}  // namespace

HostsConsole::HostsConsole(ConsoleWriter& console, bool dedup, const JobRanks& ranks, Clock::duration window)
    : console_(console), rank_limit_(ranks.exact ? clamped(ranks.count) : std::numeric_limits<int>::max()) {
  if (dedup) dedup_.emplace(ranks.exact ? clamped(ranks.count) : std::numeric_limits<int>::max(), window);
}

void HostsConsole::add_piece(bool to_stderr, const void* owner, const std::string& host_prefix,
                             const LiveLineSplitter::Piece& piece, Clock::time_point now) {
  if (!dedup_) return console_.add_piece(to_stderr, owner, host_prefix, piece.text, piece.ends_line);
  // A line shown in part, or with '\r' updates in it (drawn as they come): what is held leaves first, as on one node.
  if (!piece.whole || !piece.ends_line || piece.text.find('\r') != std::string_view::npos) {
    release_all();
    return console_.add_piece(to_stderr, owner, host_prefix, piece.text, piece.ends_line);
  }
  if (const std::optional<RankPrefix> prefix = parse_rank_prefix(piece.text, rank_limit_)) {
    const std::string whole_prefix = host_prefix + std::string(piece.text.substr(0, prefix->length));
    dedup_->add(to_stderr, prefix->ranks, host_prefix, whole_prefix, piece.text.substr(prefix->length), now, released_);
  } else {
    dedup_->add_other(to_stderr, host_prefix, piece.text, now, released_);
  }
  write_released();
}

std::optional<HostsConsole::Clock::time_point> HostsConsole::deadline() const {
  return dedup_ ? dedup_->deadline() : std::nullopt;
}

void HostsConsole::release_due(Clock::time_point now) {
  if (!dedup_) return;
  dedup_->release_due(now, released_);
  write_released();
}

void HostsConsole::release_all() {
  if (!dedup_ || dedup_->empty()) return;
  dedup_->release_all(released_);
  write_released();
}

void HostsConsole::write_released() {
  for (const ConsoleDedup::Released& line : released_) console_.add_line(line.to_stderr, line.prefix, line.text);
  released_.clear();
}

}  // namespace mgtrain
