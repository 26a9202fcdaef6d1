// Connections ordered by the time of their last event (last heard from, last sent to), oldest first:
// the rendezvous server finds its silent nodes and the heartbeats that are due, and its next deadline,
// by looking at the front instead of walking every node at each wake-up (10,000 agents).
// Times normally only grow (the steady clock), which makes an update O(1); an older time is put in its place.
#pragma once

#include <chrono>
#include <iterator>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace mgtrain::rdzv {

using ConnectionId = int;
using SteadyTime = std::chrono::steady_clock::time_point;

class RecencyList {
 public:
  // Sets `id`'s time (adding it when new) and moves it to its place in the order.
  void touch(ConnectionId id, SteadyTime when) {
    auto found = where_.find(id);
    if (found != where_.end()) order_.erase(found->second);
    auto place = order_.end();
    while (place != order_.begin() && std::prev(place)->when > when) --place;
    where_[id] = order_.insert(place, Entry{id, when});
  }
  void remove(ConnectionId id) {
    auto found = where_.find(id);
    if (found == where_.end()) return;
    order_.erase(found->second);
    where_.erase(found);
  }
  void clear() {
    order_.clear();
    where_.clear();
  }
  std::size_t size() const { return order_.size(); }
  std::optional<SteadyTime> oldest() const {
    if (order_.empty()) return std::nullopt;
    return order_.front().when;
  }
  // The connections whose time is at or before `cutoff`, oldest first.
  std::vector<ConnectionId> up_to(SteadyTime cutoff) const {
    std::vector<ConnectionId> ids;
    for (auto it = order_.begin(); it != order_.end() && it->when <= cutoff; ++it) ids.push_back(it->id);
    return ids;
  }

 private:
  struct Entry {
    ConnectionId id;
    SteadyTime when;
  };
  std::list<Entry> order_;
  std::unordered_map<ConnectionId, std::list<Entry>::iterator> where_;
};

}  // namespace mgtrain::rdzv
