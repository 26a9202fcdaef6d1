// A node's status report on the wire (wire/node_status.hpp): every figure and the replication round trip, unknown
// figures stay unknown, and a malformed report is refused naming what is wrong.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "decode_one.hpp"
#include "wire/node_status.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using mgtrain::rdzv::testing::decode_one;

TEST_CASE("a node's status report crosses the wire with its unknown figures, and a bad one is refused clearly",
          "[rdzv][codec]") {
  NodeStatus status;
  status.round = 2;
  status.node_rank = 1;
  status.host = "hostB";
  RankRow known;
  known.rank = 2;
  known.local_rank = 0;
  known.pid = 4242;
  known.state = "running";
  known.step = 120;
  known.loss = 0.25;
  known.beat_time = 1764000000.5;
  known.cpu_percent = 99.5;
  known.rss_bytes = 1LL << 30;
  known.step_rate = 3.25;
  known.straggler = true;
  known.progress_time = 1764000001.25;
  known.busy = 17.5;
  known.start_step = 100;
  known.start_source = StartSource::kSnapshot;
  known.snapshot_step = 150;
  known.snapshot_time = 1764000002.75;
  RankRow unknown;
  unknown.rank = 3;
  unknown.local_rank = 1;
  unknown.pid = 4243;
  unknown.state = "exited";
  unknown.loss = std::numeric_limits<double>::quiet_NaN();  // a diverged loss is sent as unknown, not as a bad frame
  status.ranks = {known, unknown};
  const NodeStatus back = NodeStatus::from(decode_one(encode(status.to_message())));
  CHECK(back.round == 2);
  CHECK(back.node_rank == 1);
  CHECK(back.host == "hostB");
  REQUIRE(back.ranks.size() == 2);
  CHECK(back.ranks[0].pid == 4242);
  CHECK(back.ranks[0].step == 120);
  CHECK(back.ranks[0].loss == Approx(0.25));
  CHECK(back.ranks[0].beat_time == Approx(1764000000.5));
  CHECK(back.ranks[0].rss_bytes == (1LL << 30));
  CHECK(back.ranks[0].step_rate == Approx(3.25));
  CHECK(back.ranks[0].straggler);
  CHECK(back.ranks[0].progress_time == Approx(1764000001.25));
  CHECK(back.ranks[0].busy == Approx(17.5));
  CHECK(back.ranks[0].start_step == 100);
  CHECK(back.ranks[0].start_source == StartSource::kSnapshot);
  CHECK(back.ranks[0].snapshot_step == 150);
  CHECK(back.ranks[0].snapshot_time == Approx(1764000002.75));
  CHECK(!back.ranks[1].start_step);
  CHECK(!back.ranks[1].start_source);
  CHECK(!back.ranks[1].snapshot_step);
  CHECK(!back.ranks[1].progress_time);
  CHECK(back.ranks[1].state == "exited");
  CHECK(!back.ranks[1].step);
  CHECK(!back.ranks[1].loss);
  CHECK(!back.ranks[1].cpu_percent);
  CHECK(!back.ranks[1].straggler);
  CHECK(!back.replication);

  // With its snapshot replication: what it sent its buddy and the replicas it holds.
  ReplicaStatus replication;
  replication.buddy = "node 2 (hostC, 10.77.0.3)";
  replication.connected = true;
  replication.sent = 12;
  replication.skipped = 3;
  replication.bytes_sent = 1LL << 33;
  replication.sent_step = 600;
  replication.sent_time = 1764000003.5;
  replication.received = 11;
  replication.held = {{0, 550, 1764000001.25}, {1, 550, 1764000001.5}};
  status.replication = replication;
  const NodeStatus with = NodeStatus::from(decode_one(encode(status.to_message())));
  REQUIRE(with.replication);
  CHECK(with.replication->buddy == replication.buddy);
  CHECK(with.replication->connected);
  CHECK(with.replication->sent == 12);
  CHECK(with.replication->skipped == 3);
  CHECK(with.replication->bytes_sent == (1LL << 33));
  CHECK(with.replication->sent_step == 600);
  CHECK(with.replication->sent_time == Approx(1764000003.5));
  CHECK(with.replication->received == 11);
  REQUIRE(with.replication->held.size() == 2);
  CHECK(with.replication->held[1].rank == 1);
  CHECK(with.replication->held[1].step == 550);
  CHECK(with.replication->held[1].time == Approx(1764000001.5));
  Message bad_replica = status.to_message();
  bad_replica.set("replica.held", "0 550\n");
  CHECK_THROWS_WITH(NodeStatus::from(bad_replica), Catch::Contains("replica line '0 550' is not 'rank step time'"));
  bad_replica.set("replica.held", "");
  bad_replica.set("replica.sent_step", "soon");
  CHECK_THROWS_WITH(NodeStatus::from(bad_replica), Catch::Contains("replica sent step 'soon' is not an integer"));
  status.replication.reset();

  Message bad = status.to_message();
  bad.set("count", 3);
  CHECK_THROWS_WITH(NodeStatus::from(bad), Catch::Contains("count 3 but 2 rank lines"));
  bad = status.to_message();
  bad.set("ranks", "2 0 4242 running 1 - - - - - 0 - - - - - -\n3 1 4243 sleeping - - - - - - 0 - - - - - -\n");
  CHECK_THROWS_WITH(NodeStatus::from(bad), Catch::Contains("state 'sleeping'"));
  bad.set("ranks", "2 0 4242 running x - - - - - 0 - - - - - -\n3 1 4243 exited - - - - - - 0 - - - - - -\n");
  CHECK_THROWS_WITH(NodeStatus::from(bad), Catch::Contains("step 'x' is not an integer"));
  bad.set("ranks", "2 0 4242 running 1 - - - - - 0 - - 0 memory - -\n3 1 4243 exited - - - - - - 0 - - - - - -\n");
  CHECK_THROWS_WITH(NodeStatus::from(bad), Catch::Contains("start source 'memory'"));
  bad.set("ranks", "2 0 4242 running\n3 1 4243 exited - - - - - - 0 - - - - - -\n");
  CHECK_THROWS_WITH(NodeStatus::from(bad), Catch::Contains("has 4 fields, not 17"));
  bad.set("count", kMaxStatusRanks + 1);
  CHECK_THROWS_WITH(NodeStatus::from(bad), Catch::Contains("at most 4096"));
}
