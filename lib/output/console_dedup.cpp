// Console deduplication (see console_dedup.hpp).
#include "output/console_dedup.hpp"

#include <algorithm>

namespace mgtrain {

void RankSet::insert(int first, int last) {
  if (first > last) return;
  // The first run that ends at or after first - 1 (it touches or follows the new one), then every run that starts at
  // or before last + 1 merges into it (64-bit: no overflow at INT_MIN or INT_MAX).
  auto begin = std::lower_bound(runs_.begin(), runs_.end(), first, [](const Run& run, int value) {
    return static_cast<std::int64_t>(run.last) + 1 < value;
  });
  auto end = begin;
  Run merged{first, last};
  while (end != runs_.end() && static_cast<std::int64_t>(end->first) <= static_cast<std::int64_t>(last) + 1) {
    merged.first = std::min(merged.first, end->first);
    merged.last = std::max(merged.last, end->last);
    ++end;
  }
  begin = runs_.erase(begin, end);
  runs_.insert(begin, merged);
}

void RankSet::insert(const RankSet& other) {
  for (const Run& run : other.runs_) insert(run.first, run.last);
}

bool RankSet::intersects(const RankSet& other) const {
  auto a = runs_.begin();
  auto b = other.runs_.begin();
  while (a != runs_.end() && b != other.runs_.end()) {
    if (a->last < b->first) {
      ++a;
    } else if (b->last < a->first) {
      ++b;
    } else {
      return true;
    }
  }
  return false;
}

std::int64_t RankSet::size() const {
  std::int64_t count = 0;
  for (const Run& run : runs_) count += static_cast<std::int64_t>(run.last) - run.first + 1;
  return count;
}

std::string RankSet::text() const {
  std::string text;
  for (const Run& run : runs_) {
    if (!text.empty()) text += ',';
    text += std::to_string(run.first);
    if (run.last != run.first) text += "-" + std::to_string(run.last);
  }
  return text;
}

namespace {

// A rank as std::to_string writes it (no sign, no leading zero), below `limit`; consumed from `text`.
std::optional<int> take_rank(std::string_view& text, int limit) {
  std::size_t digits = 0;
  std::int64_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    if (digits == 1 && value == 0) return std::nullopt;  // a leading zero
    value = value * 10 + (text[digits] - '0');
    if (value >= limit) return std::nullopt;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  text.remove_prefix(digits);
  return static_cast<int>(value);
}

bool take(std::string_view& text, std::string_view expected) {
  if (text.substr(0, expected.size()) != expected) return false;
  text.remove_prefix(expected.size());
  return true;
}

}  // namespace

std::optional<RankPrefix> parse_rank_prefix(std::string_view line, int rank_limit) {
  std::string_view rest = line;
  RankPrefix prefix;
  if (take(rest, "[rank ")) {
    const std::optional<int> rank = take_rank(rest, rank_limit);
    if (!rank || !take(rest, "] ")) return std::nullopt;
    prefix.ranks.insert(*rank, *rank);
  } else if (take(rest, "[ranks ")) {
    std::int64_t previous_last = -2;  // a run must start past previous_last + 1: apart, not adjacent
    do {
      const std::optional<int> first = take_rank(rest, rank_limit);
      if (!first || *first <= previous_last + 1) return std::nullopt;
      int last = *first;
      if (take(rest, "-")) {
        const std::optional<int> end = take_rank(rest, rank_limit);
        if (!end || *end <= *first) return std::nullopt;
        last = *end;
      }
      prefix.ranks.insert(*first, last);
      previous_last = last;
    } while (take(rest, ","));
    if (!take(rest, "] ") || prefix.ranks.size() < 2) return std::nullopt;
  } else {
    return std::nullopt;
  }
  prefix.length = line.size() - rest.size();
  return prefix;
}

ConsoleDedup::ConsoleDedup(int ranks_on_console, Clock::duration window)
    : ranks_on_console_(std::max(1, ranks_on_console)), window_(window) {}

std::string ConsoleDedup::key_of(bool to_stderr, std::string_view text) {
  std::string key(1, to_stderr ? 'e' : 'o');
  key.append(text);
  return key;
}

std::size_t ConsoleDedup::held_size(const Group& group) const {
  return group.text.size() + group.first_prefix.size() + group.origin.size();
}

void ConsoleDedup::add(bool to_stderr, int rank, std::string_view prefix, std::string_view text, Clock::time_point now,
                       std::vector<Released>& out) {
  add(to_stderr, RankSet(rank), {}, prefix, text, now, out);
}

void ConsoleDedup::add(bool to_stderr, const RankSet& ranks, std::string_view origin, std::string_view prefix,
                       std::string_view text, Clock::time_point now, std::vector<Released>& out) {
  std::vector<std::uint64_t>& ids = open_[key_of(to_stderr, text)];
  for (std::uint64_t id : ids) {
    Group& group = groups_[static_cast<std::size_t>(id - front_id_)];
    if (group.ranks.intersects(ranks)) continue;  // a second copy of one of its ranks
    group.ranks.insert(ranks);
    ++group.copies;
    if (origin != group.origin) group.one_origin = false;
    group.complete = group.ranks.size() >= ranks_on_console_;
    release_due(now, out);
    return;
  }
  ids.push_back(front_id_ + groups_.size());
  Group group;
  group.to_stderr = to_stderr;
  group.text.assign(text);
  group.first_prefix.assign(prefix);
  group.origin.assign(origin);
  group.copies = 1;
  group.ranks = ranks;
  group.due = now + window_;
  group.complete = group.ranks.size() >= ranks_on_console_;
  hold(std::move(group), out);
  release_due(now, out);
}

void ConsoleDedup::add_other(bool to_stderr, std::string_view prefix, std::string_view text, Clock::time_point now,
                             std::vector<Released>& out) {
  if (groups_.empty()) {
    out.push_back(Released{to_stderr, std::string(prefix), std::string(text)});
    return;
  }
  Group group;
  group.to_stderr = to_stderr;
  group.deduplicated = false;
  group.text.assign(text);
  group.first_prefix.assign(prefix);
  group.copies = 1;
  group.due = now;
  group.complete = true;  // it leaves as soon as it is at the front
  hold(std::move(group), out);
}

void ConsoleDedup::hold(Group group, std::vector<Released>& out) {
  held_bytes_ += held_size(group);
  groups_.push_back(std::move(group));
  while (groups_.size() > kMaxHeldLines || held_bytes_ > kMaxHeldBytes) release_front(out);
}

void ConsoleDedup::release_due(Clock::time_point now, std::vector<Released>& out) {
  while (!groups_.empty() && (groups_.front().complete || groups_.front().due <= now)) release_front(out);
}

void ConsoleDedup::release_all(std::vector<Released>& out) {
  while (!groups_.empty()) release_front(out);
}

std::optional<ConsoleDedup::Clock::time_point> ConsoleDedup::deadline() const {
  if (groups_.empty()) return std::nullopt;
  return groups_.front().due;
}

void ConsoleDedup::release_front(std::vector<Released>& out) {
  Group& group = groups_.front();
  if (group.deduplicated) {
    const std::string key = key_of(group.to_stderr, group.text);
    auto ids = open_.find(key);
    if (ids != open_.end()) {
      ids->second.erase(ids->second.begin());  // the oldest of its key is the front of the queue
      if (ids->second.empty()) open_.erase(ids);
    }
  }
  held_bytes_ -= held_size(group);
  Released released;
  released.to_stderr = group.to_stderr;
  if (group.copies == 1) {
    released.prefix = std::move(group.first_prefix);
  } else {
    released.prefix = (group.one_origin ? group.origin : std::string()) + "[ranks " + group.ranks.text() + "] ";
  }
  released.text = std::move(group.text);
  out.push_back(std::move(released));
  groups_.pop_front();
  ++front_id_;
}

}  // namespace mgtrain
