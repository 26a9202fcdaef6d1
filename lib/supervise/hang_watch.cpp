// Hang detection: the root-cause rule (decide_hang), the detection line and the per-rank progress it works on.
#include "supervise/hang_watch.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "diagnose/top_frames.hpp"
#include "util/strings.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

HangRank hang_rank(const RankProgress& rank, SteadyTime now) {
  return HangRank{rank.local_rank, seconds_between(rank.last_progress, now), rank.last_progress, rank.last_step,
                  rank.stopped};
}

bool earlier(const RankProgress* a, const RankProgress* b) {
  if (a->last_progress != b->last_progress) return a->last_progress < b->last_progress;
  return a->local_rank < b->local_rank;
}

std::string step_text(const std::optional<std::int64_t>& step) {
  return step ? fmt::format("last step {} at ", *step) : "last report at ";
}

}  // namespace

std::optional<HangVerdict> decide_hang(const std::vector<RankProgress>& ranks, SteadyTime now, double timeout_s) {
  if (timeout_s <= 0) return std::nullopt;
  std::vector<const RankProgress*> stalled;
  bool due = false;
  for (const RankProgress& rank : ranks) {
    if (!rank.running || !rank.reported) continue;
    const double silent = seconds_between(rank.last_progress, now);
    if (silent >= timeout_s) due = true;
    if (silent >= kStalledFraction * timeout_s) stalled.push_back(&rank);
  }
  if (!due) return std::nullopt;
  std::sort(stalled.begin(), stalled.end(), earlier);

  HangVerdict verdict;
  std::vector<const RankProgress*> hung;
  for (const RankProgress* rank : stalled) {
    if (rank->stopped) hung.push_back(rank);
  }
  if (hung.empty()) {
    // The earliest last progress, unless a rank reported within the tie window of it with a lower step.
    const SteadyTime earliest = stalled.front()->last_progress;
    std::vector<const RankProgress*> near;
    bool steps_known = true;
    for (const RankProgress* rank : stalled) {
      if (seconds_between(earliest, rank->last_progress) > kTieWindowS) continue;
      near.push_back(rank);
      steps_known = steps_known && rank->last_step.has_value();
    }
    const RankProgress* first = near.front();
    if (steps_known) {
      for (const RankProgress* rank : near) {
        if (*rank->last_step < *first->last_step) first = rank;  // `near` is in time order: ties keep the earlier
      }
    }
    hung.push_back(first);
    for (const RankProgress* rank : near) {
      if (rank != first && (!steps_known || rank->last_step == first->last_step)) {
        verdict.tied.push_back(rank->local_rank);
      }
    }
  }
  for (const RankProgress* rank : stalled) {
    const bool is_hung = std::find(hung.begin(), hung.end(), rank) != hung.end();
    (is_hung ? verdict.hung : verdict.waiting).push_back(hang_rank(*rank, now));
  }
  return verdict;
}

std::optional<std::size_t> settled_by_stacks(const std::vector<std::vector<std::string>>& top_frames) {
  std::optional<std::size_t> outside;
  std::size_t inside = 0;
  for (std::size_t index = 0; index < top_frames.size(); ++index) {
    if (top_frames[index].empty() || top_frames[index].front().empty()) return std::nullopt;
    if (diagnose::waits_in_collective(top_frames[index].front())) {
      ++inside;
    } else if (outside) {
      return std::nullopt;  // two ranks outside: the stacks do not say which one
    } else {
      outside = index;
    }
  }
  return inside > 0 ? outside : std::nullopt;
}

std::string rank_list(std::vector<int> ranks) {
  const char* word = ranks.size() == 1 ? "rank " : "ranks ";
  return word + rank_runs(std::move(ranks), RankRuns::Prose);
}

std::string describe_hang(const HangVerdict& verdict, const std::function<int(int)>& global_rank,
                          const std::function<std::string(SteadyTime)>& clock) {
  std::string out;
  for (const HangRank& rank : verdict.hung) {
    out += fmt::format("{}rank {} hung: no progress for {} ({}{}){}", out.empty() ? "" : "; ",
                       global_rank(rank.local_rank), format_seconds(rank.silent_s), step_text(rank.last_step),
                       clock(rank.last_progress), rank.stopped ? ", its process is stopped" : "");
  }
  if (!verdict.waiting.empty()) {
    std::vector<int> waiting;
    for (const HangRank& rank : verdict.waiting) waiting.push_back(global_rank(rank.local_rank));
    out += fmt::format("{}{} waiting since {}", out.empty() ? "" : "; ", rank_list(waiting),
                       clock(verdict.waiting.front().last_progress));
  }
  if (!verdict.tied.empty() && verdict.hung.size() == 1) {
    std::vector<int> tied;
    for (int local_rank : verdict.tied) tied.push_back(global_rank(local_rank));
    out += fmt::format(" (progress alone cannot tell {} from rank {}: same step, stopped within {} of it)",
                       rank_list(tied), global_rank(verdict.hung.front().local_rank), format_seconds(kTieWindowS));
  }
  return out;
}

HangWatch::HangWatch(int nproc, double timeout_s)
    : timeout_s_(timeout_s), ranks_(static_cast<std::size_t>(nproc)), announced_(static_cast<std::size_t>(nproc)) {
  for (int rank = 0; rank < nproc; ++rank) ranks_[rank].local_rank = rank;
}

void HangWatch::start_attempt(SteadyTime now) {
  attempt_start_ = now;
  for (RankProgress& rank : ranks_) rank = RankProgress{rank.local_rank, true, false, {}, std::nullopt, false};
}

void HangWatch::on_progress(int local_rank, SteadyTime when, std::optional<std::int64_t> step) {
  RankProgress& rank = ranks_.at(local_rank);
  if (!rank.running) return;
  if (!rank.reported || when > rank.last_progress) rank.last_progress = when;
  rank.reported = true;
  rank.last_step = step;
}

void HangWatch::on_exit(int local_rank) { ranks_.at(local_rank).running = false; }

std::vector<int> HangWatch::take_unreported(SteadyTime now) {
  std::vector<int> unreported;
  if (timeout_s_ <= 0 || now - attempt_start_ < steady_seconds(timeout_s_)) return unreported;
  for (RankProgress& rank : ranks_) {
    if (!rank.running || rank.reported || announced_[rank.local_rank]) continue;
    announced_[rank.local_rank] = true;
    unreported.push_back(rank.local_rank);
  }
  return unreported;
}

std::optional<HangVerdict> HangWatch::check(SteadyTime now, const std::function<bool(int)>& stopped) const {
  if (!decide_hang(ranks_, now, timeout_s_)) return std::nullopt;
  std::vector<RankProgress> with_evidence = ranks_;
  for (RankProgress& rank : with_evidence) rank.stopped = rank.running && rank.reported && stopped(rank.local_rank);
  return decide_hang(with_evidence, now, timeout_s_);
}

HangVerdict HangWatch::all_waiting(SteadyTime now, const std::function<bool(int)>& stopped) const {
  std::vector<const RankProgress*> reported;
  for (const RankProgress& rank : ranks_) {
    if (rank.running && rank.reported) reported.push_back(&rank);
  }
  std::sort(reported.begin(), reported.end(), earlier);
  HangVerdict verdict;
  for (const RankProgress* rank : reported) {
    HangRank waiting = hang_rank(*rank, now);
    waiting.stopped = stopped(rank->local_rank);
    verdict.waiting.push_back(waiting);
  }
  return verdict;
}

std::optional<SteadyTime> HangWatch::next_deadline() const {
  if (timeout_s_ <= 0) return std::nullopt;
  std::optional<SteadyTime> next;
  const auto keep = [&next](SteadyTime due) {
    if (!next || due < *next) next = due;
  };
  for (const RankProgress& rank : ranks_) {
    if (!rank.running) continue;
    if (rank.reported) {
      keep(rank.last_progress + steady_seconds(timeout_s_));
    } else if (!announced_[rank.local_rank]) {
      keep(attempt_start_ + steady_seconds(timeout_s_));
    }
  }
  return next;
}

}  // namespace mgtrain
