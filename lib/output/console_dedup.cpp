// Console deduplication (see console_dedup.hpp).
#include "output/console_dedup.hpp"

#include <algorithm>

#include "util/strings.hpp"

namespace mgtrain {

ConsoleDedup::ConsoleDedup(int ranks_on_console, Clock::duration window)
    : ranks_on_console_(std::max(1, ranks_on_console)), window_(window) {}

std::string ConsoleDedup::key_of(bool to_stderr, std::string_view text) {
  std::string key(1, to_stderr ? 'e' : 'o');
  key.append(text);
  return key;
}

void ConsoleDedup::add(bool to_stderr, int rank, std::string_view prefix, std::string_view text, Clock::time_point now,
                       std::vector<Released>& out) {
  std::vector<std::uint64_t>& ids = open_[key_of(to_stderr, text)];
  for (std::uint64_t id : ids) {
    Group& group = groups_[static_cast<std::size_t>(id - front_id_)];
    if (std::find(group.ranks.begin(), group.ranks.end(), rank) != group.ranks.end()) continue;  // its second copy
    group.ranks.push_back(rank);
    group.complete = static_cast<int>(group.ranks.size()) >= ranks_on_console_;
    release_due(now, out);
    return;
  }
  ids.push_back(front_id_ + groups_.size());
  Group group;
  group.to_stderr = to_stderr;
  group.text.assign(text);
  group.first_prefix.assign(prefix);
  group.ranks.push_back(rank);
  group.due = now + window_;
  group.complete = ranks_on_console_ == 1;
  held_bytes_ += text.size() + prefix.size();
  groups_.push_back(std::move(group));
  while (groups_.size() > kMaxHeldLines || held_bytes_ > kMaxHeldBytes) release_front(out);
  release_due(now, out);
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
  const std::string key = key_of(group.to_stderr, group.text);
  auto ids = open_.find(key);
  if (ids != open_.end()) {
    ids->second.erase(ids->second.begin());  // the oldest of its key is the front of the queue
    if (ids->second.empty()) open_.erase(ids);
  }
  held_bytes_ -= group.text.size() + group.first_prefix.size();
  Released released;
  released.to_stderr = group.to_stderr;
  released.prefix = group.ranks.size() == 1 ? std::move(group.first_prefix)
                                            : "[ranks " + rank_runs(group.ranks, RankRuns::Compact) + "] ";
  released.text = std::move(group.text);
  out.push_back(std::move(released));
  groups_.pop_front();
  ++front_id_;
}

}  // namespace mgtrain
