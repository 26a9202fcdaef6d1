// DistributedSampler: shard sizes, disjointness, coverage, per-epoch reshuffling, and equality with Python's
// torch.utils.data.DistributedSampler, and mid-epoch resume (indices_after) with the same or another world size.
#include "catch_with_torch.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "train/data/distributed_sampler.hpp"
#include "train_test_support.hpp"
#include "util/error.hpp"

using mgtrain::DistributedSampler;

namespace {

std::vector<std::vector<int64_t>> all_shards(int64_t n, int world, bool shuffle, uint64_t seed, bool drop_last,
                                             int64_t epoch) {
  std::vector<std::vector<int64_t>> shards;
  for (int r = 0; r < world; ++r)
    shards.push_back(DistributedSampler(n, world, r, shuffle, seed, drop_last).indices(epoch));
  return shards;
}

}  // namespace

TEST_CASE("sampler: sizes with padding and with drop_last") {
  CHECK(DistributedSampler(10, 3, 0, true, 0, false).samples_per_rank() == 4);  // padded to 12
  CHECK(DistributedSampler(10, 3, 0, true, 0, true).samples_per_rank() == 3);   // 9 used, 1 dropped
  CHECK(DistributedSampler(12, 3, 2, true, 0, true).samples_per_rank() == 4);
  CHECK(DistributedSampler(12, 3, 2, true, 0, false).samples_per_rank() == 4);
  CHECK(DistributedSampler(2, 3, 0, false, 0, false).samples_per_rank() == 1);  // padding repeats
  for (int r = 0; r < 3; ++r) CHECK(DistributedSampler(10, 3, r, true, 5, false).indices(0).size() == 4);
  CHECK_THROWS_AS(DistributedSampler(2, 3, 0, false, 0, true), mgtrain::UsageError);
  CHECK_THROWS_AS(DistributedSampler(10, 2, 2, false, 0, false), mgtrain::UsageError);
}

TEST_CASE("sampler: shards are disjoint and cover the data set") {
  for (bool shuffle : {false, true}) {
    const auto shards = all_shards(1000, 4, shuffle, 42, false, 3);
    std::set<int64_t> seen;
    for (const auto& shard : shards) {
      CHECK(shard.size() == 250);
      for (int64_t i : shard) CHECK(seen.insert(i).second);
    }
    CHECK(seen.size() == 1000);
    CHECK(*seen.begin() == 0);
    CHECK(*seen.rbegin() == 999);
  }
}

TEST_CASE("sampler: padding repeats the order from its start, drop_last cuts its tail") {
  // Unshuffled: the order is 0..9, padded with 0, 1 to 12 entries; rank r takes positions r, r+3, ...
  const auto padded = all_shards(10, 3, false, 0, false, 0);
  CHECK(padded[0] == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(padded[1] == std::vector<int64_t>{1, 4, 7, 0});
  CHECK(padded[2] == std::vector<int64_t>{2, 5, 8, 1});
  const auto cut = all_shards(10, 3, false, 0, true, 0);
  CHECK(cut[0] == std::vector<int64_t>{0, 3, 6});
  CHECK(cut[2] == std::vector<int64_t>{2, 5, 8});
  // Shuffled with padding: the union is still the whole data set, and exactly 2 samples appear twice.
  std::multiset<int64_t> all;
  for (const auto& shard : all_shards(10, 3, true, 7, false, 1)) all.insert(shard.begin(), shard.end());
  CHECK(all.size() == 12);
  CHECK(std::set<int64_t>(all.begin(), all.end()).size() == 10);
}

TEST_CASE("sampler: evaluation shards cover the data set exactly once") {
  CHECK(DistributedSampler::evaluation_shard(10, 3, 0) == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(DistributedSampler::evaluation_shard(10, 3, 2) == std::vector<int64_t>{2, 5, 8});
  CHECK(DistributedSampler::evaluation_shard(2, 3, 2).empty());
  CHECK_THROWS_AS(DistributedSampler::evaluation_shard(10, 3, 3), mgtrain::UsageError);
}

TEST_CASE("sampler: the order changes per epoch and is reproducible") {
  const DistributedSampler sampler(500, 2, 1, true, 42, false);
  const auto epoch0 = sampler.indices(0);
  CHECK(sampler.indices(0) == epoch0);
  CHECK(DistributedSampler(500, 2, 1, true, 42, false).indices(0) == epoch0);
  CHECK(sampler.indices(1) != epoch0);
  CHECK(DistributedSampler(500, 2, 1, true, 43, false).indices(0) != epoch0);
  // seed + epoch is what matters, as in Python.
  CHECK(DistributedSampler(500, 2, 1, true, 43, false).indices(0) == sampler.indices(1));
  const DistributedSampler ordered(500, 2, 1, false, 42, false);
  CHECK(ordered.indices(0) == ordered.indices(5));
}

TEST_CASE("sampler: identical to Python's torch.utils.data.DistributedSampler") {
  const std::string why = mgtrain::test::python_torch_unavailable_reason();
  if (!why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  struct Case {
    int64_t n;
    int world;
    uint64_t seed;
    int64_t epoch;
    bool shuffle, drop_last;
  };
  const std::vector<Case> cases = {{10, 3, 0, 0, true, false},     {10, 3, 42, 5, true, true},
                                   {1000, 4, 7, 3, true, false},   {17, 2, 123, 1, false, false},
                                   {60000, 2, 42, 0, true, false}, {61, 8, 1, 9, true, true},
                                   {5, 8, 3, 2, true, false}};
  std::string args;
  for (const auto& c : cases) {
    args += fmt::format("{} {} {} {} {} {};", c.n, c.world, c.seed, c.epoch, int(c.shuffle), int(c.drop_last));
  }
  const char* script = R"(
import sys
from torch.utils.data import DistributedSampler
class Sized:
    def __init__(self, n): self.n = n
    def __len__(self): return self.n
for case in sys.argv[1].split(';'):
    if not case: continue
    n, w, seed, epoch, shuffle, drop_last = map(int, case.split())
    for r in range(w):
        s = DistributedSampler(Sized(n), num_replicas=w, rank=r, shuffle=bool(shuffle), seed=seed, drop_last=bool(drop_last))
        s.set_epoch(epoch)
        print(' '.join(map(str, list(s))))
)";
  const auto out = mgtrain::test::run_reference_python(script, {args});
  REQUIRE(out);
  std::istringstream lines(*out);
  for (const auto& c : cases) {
    for (int r = 0; r < c.world; ++r) {
      std::string line;
      REQUIRE(std::getline(lines, line));
      std::istringstream numbers(line);
      std::vector<int64_t> expected;
      for (int64_t v; numbers >> v;) expected.push_back(v);
      INFO(fmt::format("N={} W={} rank={} seed={} epoch={} shuffle={} drop_last={}", c.n, c.world, r, c.seed, c.epoch,
                       c.shuffle, c.drop_last));
      CHECK(DistributedSampler(c.n, c.world, r, c.shuffle, c.seed, c.drop_last).indices(c.epoch) == expected);
    }
  }
}

namespace {

// The epoch's global order (one rank, no padding): what every world size's positions index into.
std::vector<int64_t> global_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  return DistributedSampler(n, 1, 0, shuffle, seed, false).indices(epoch);
}

// Interleaves the ranks' shards back into global positions: position r + k*W is shards[r][k].
std::vector<int64_t> interleave(const std::vector<std::vector<int64_t>>& shards) {
  std::vector<int64_t> positions;
  for (size_t k = 0; k < shards[0].size(); ++k) {
    for (const auto& shard : shards) positions.push_back(shard[k]);
  }
  return positions;
}

std::vector<std::vector<int64_t>> all_shards_after(int64_t n, int world, bool shuffle, uint64_t seed, bool drop_last,
                                                   int64_t epoch, int64_t consumed) {
  std::vector<std::vector<int64_t>> shards;
  for (int r = 0; r < world; ++r) {
    shards.push_back(DistributedSampler(n, world, r, shuffle, seed, drop_last).indices_after(epoch, consumed));
  }
  return shards;
}

}  // namespace

TEST_CASE("sampler resume: indices(epoch) equals indices_after(epoch, 0), and consumed counts are checked") {
  for (bool drop_last : {false, true}) {
    const DistributedSampler sampler(10, 3, 1, true, 4, drop_last);
    CHECK(sampler.indices_after(2, 0) == sampler.indices(2));
    CHECK(sampler.samples_per_rank_after(0) == sampler.samples_per_rank());
    CHECK(sampler.indices_after(2, 10).empty());  // the whole order consumed
    CHECK(sampler.indices_after(2, 12).empty());  // ... and its padding (a last partial batch)
    CHECK_THROWS_AS(sampler.indices_after(2, -1), mgtrain::UsageError);
  }
}

TEST_CASE("sampler resume: with the same world size, exactly the rest of each rank's epoch") {
  struct Case {
    int64_t n;
    int world;
    int64_t batch;
  };
  // Even splits, padded epochs (10 over 3, 61 over 8, 5 over 8) and drop_last cuts.
  for (const Case c :
       {Case{100, 2, 5}, Case{10, 3, 1}, Case{10, 3, 2}, Case{61, 8, 3}, Case{5, 8, 1}, Case{1000, 4, 32}}) {
    for (bool shuffle : {false, true}) {
      for (bool drop_last : {false, true}) {
        if (drop_last && c.n < c.world) continue;
        for (int r = 0; r < c.world; ++r) {
          const DistributedSampler sampler(c.n, c.world, r, shuffle, 11, drop_last);
          const auto full = sampler.indices(3);
          for (int64_t b = 0; b * c.batch <= sampler.samples_per_rank(); ++b) {
            INFO(fmt::format("N={} W={} rank={} B={} b={} shuffle={} drop_last={}", c.n, c.world, r, c.batch, b,
                             shuffle, drop_last));
            const std::vector<int64_t> rest(full.begin() + b * c.batch, full.end());
            CHECK(sampler.indices_after(3, b * c.batch * c.world) == rest);
            CHECK(sampler.samples_per_rank_after(b * c.batch * c.world) == static_cast<int64_t>(rest.size()));
          }
        }
      }
    }
  }
}

TEST_CASE("sampler resume: another world size shares exactly the remaining samples") {
  struct Case {
    int64_t n;
    int from, to;
    int64_t batch, micro_batches;
  };
  // W=2 -> 1, 1 -> 2, 2 -> 3 (and a padded 3 -> 2), at several points of the epoch.
  for (const Case c : {Case{101, 2, 1, 4, 5}, Case{101, 1, 2, 4, 5}, Case{100, 2, 3, 8, 3}, Case{101, 2, 3, 7, 1},
                       Case{10, 3, 2, 1, 2}, Case{37, 2, 3, 3, 6}}) {
    for (bool shuffle : {false, true}) {
      for (bool drop_last : {false, true}) {
        INFO(fmt::format("N={} W={} -> {} B={} b={} shuffle={} drop_last={}", c.n, c.from, c.to, c.batch,
                         c.micro_batches, shuffle, drop_last));
        const int64_t consumed = c.micro_batches * c.batch * c.from;
        REQUIRE(consumed <= c.n);
        const auto order = global_order(c.n, shuffle, 5, 1);
        // What the old ranks trained on is exactly the first `consumed` positions of the order.
        std::multiset<int64_t> before;
        for (const auto& shard : all_shards(c.n, c.from, shuffle, 5, drop_last, 1)) {
          before.insert(shard.begin(), shard.begin() + c.micro_batches * c.batch);
        }
        CHECK(before == std::multiset<int64_t>(order.begin(), order.begin() + consumed));

        const auto after = all_shards_after(c.n, c.to, shuffle, 5, drop_last, 1, consumed);
        const int64_t remaining = c.n - consumed;
        const int64_t per_rank = drop_last ? remaining / c.to : (remaining + c.to - 1) / c.to;
        for (const auto& shard : after) CHECK(static_cast<int64_t>(shard.size()) == per_rank);
        const auto positions = interleave(after);
        // In order: the remaining positions, then (without drop_last) padding that continues the order from its start.
        for (size_t i = 0; i < positions.size(); ++i) {
          CHECK(positions[i] == order[(static_cast<size_t>(consumed) + i) % order.size()]);
        }
        std::set<int64_t> seen(positions.begin(), positions.end());
        if (drop_last) {
          CHECK(seen.size() == positions.size());                       // no repeats
          CHECK(remaining - static_cast<int64_t>(seen.size()) < c.to);  // fewer than W' dropped
        } else {
          // Every remaining sample exactly once, plus fewer than W' padding repeats of samples from the epoch's start.
          for (int64_t i = consumed; i < c.n; ++i) CHECK(std::count(positions.begin(), positions.end(), order[i]) == 1);
          CHECK(static_cast<int64_t>(positions.size()) - remaining < c.to);
          std::multiset<int64_t> whole = before;
          whole.insert(positions.begin(), positions.end());
          CHECK(std::set<int64_t>(whole.begin(), whole.end()).size() == static_cast<size_t>(c.n));
        }
      }
    }
  }
}
