// Snapshot replication's parts (replicate/): a part's wire form and its refusals; a node's stores sent part by part
// into a buddy's replicas (several stores in turn, a snapshot of several parts, verified before it counts); a
// snapshot overwritten in flight given up and counted as skipped; a torn or oversized snapshot refused with its
// reason; the Python helper's images verified by their CRC-32; and two SnapshotReplications on loopback, with and
// without a token, one sending to the other through a real event loop.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/snapshot_store.hpp"
#include "checkpoint/snapshot_stores.hpp"
#include "process/event_loop.hpp"
#include "replicate/replica_sender.hpp"
#include "replicate/replica_stores.hpp"
#include "replicate/snapshot_part.hpp"
#include "replicate/snapshot_replication.hpp"
#include "support/checkpoint_test_data.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;

namespace {

// A worker's store: the launcher's descriptor and the worker's view of it.
struct WorkerStore {
  Fd fd = SnapshotStore::create("worker");
  SnapshotStore store{fd.get(), "worker"};
};

// Every part the sender has now, into `replicas`; the number of parts.
int send_all(ReplicaSender& sender, ReplicaStores& replicas, std::vector<std::string>& notes) {
  int parts = 0;
  while (std::optional<SnapshotPart> part = sender.next()) {
    replicas.take(SnapshotPart::from(part->to_message()), "10.0.0.1:1234", notes);
    ++parts;
  }
  return parts;
}

}  // namespace

TEST_CASE("snapshot part: the wire form round trips, and bad fields are refused by name", "[replicate]") {
  SnapshotPart part;
  part.rank = 3;
  part.round = 2;
  part.origin = "node 1 (hostB, 10.77.0.2)";
  part.step = 450;
  part.generation = 9;
  part.time_ms = 1764000000123;
  part.total = 10;
  part.offset = 4;
  part.data = std::string("\0abc\xff\n", 6);
  const SnapshotPart back = SnapshotPart::from(part.to_message());
  CHECK(back.rank == 3);
  CHECK(back.round == 2);
  CHECK(back.origin == part.origin);
  CHECK(back.step == 450);
  CHECK(back.generation == 9);
  CHECK(back.time_ms == 1764000000123);
  CHECK(back.total == 10);
  CHECK(back.offset == 4);
  CHECK(back.data == part.data);
  CHECK(back.last());

  rdzv::Message beyond = part.to_message();
  beyond.set("offset", 5);  // 6 bytes at 5 of 10
  CHECK_THROWS_WITH(SnapshotPart::from(beyond), Contains("6 bytes at offset 5 of a 10-byte snapshot"));
  rdzv::Message negative = part.to_message();
  negative.set("step", -1);
  CHECK_THROWS_WITH(SnapshotPart::from(negative), Contains("step is -1"));
  rdzv::Message missing = part.to_message();
  missing.fields.erase("total");
  CHECK_THROWS_WITH(SnapshotPart::from(missing), Contains("total"));
  rdzv::Message empty = part.to_message();
  empty.set("data", "");
  CHECK_THROWS_AS(SnapshotPart::from(empty), rdzv::ProtocolError);
  CHECK_THROWS_WITH(SnapshotPart::from(rdzv::heartbeat_message()), Contains("got heartbeat"));
}

TEST_CASE("replication: each store's newest snapshot arrives whole, in parts, and verified", "[replicate]") {
  WorkerStore rank4, rank5;
  const testing::TestCheckpoint small = testing::make_test_checkpoint(10, 0.1);
  const testing::TestCheckpoint large = testing::make_test_checkpoint(20, 2.5);  // three parts
  ReplicaSender sender;
  SnapshotStores launcher;
  ReplicaStores replicas(launcher, std::uint64_t{1} << 30);
  std::vector<std::string> notes;
  sender.set_round(1, "node 2 (hostC, 10.0.0.3)", {{4, rank4.fd.get()}, {5, rank5.fd.get()}});
  CHECK_FALSE(sender.next().has_value());  // nothing written yet
  testing::put_snapshot(rank4.store, 10, small);
  testing::put_snapshot(rank5.store, 20, large);
  CHECK(send_all(sender, replicas, notes) >= 4);
  CHECK(notes.empty());
  const std::vector<ReplicaStores::Held> held = replicas.held();
  REQUIRE(held.size() == 2);
  CHECK(held[0].rank == 4);
  CHECK(held[0].step == 10);
  CHECK(held[1].rank == 5);
  CHECK(held[1].step == 20);
  CHECK(held[1].origin == "node 2 (hostC, 10.0.0.3)");
  CHECK(held[1].time_ms > 0);
  CHECK(sender.counters().sent == 2);
  CHECK(sender.counters().skipped == 0);
  CHECK(sender.counters().newest_step == 20);
  CHECK(replicas.received() == 2);
  CHECK(replicas.bytes() > 2 * 1024 * 1024);
  CHECK_FALSE(sender.next().has_value());  // nothing newer

  // Three more snapshots of rank 4 before the next look: the newest is sent, the two before it are skipped.
  testing::put_snapshot(rank4.store, 30, small);
  testing::put_snapshot(rank4.store, 40, small);
  testing::put_snapshot(rank4.store, 50, small);
  CHECK(send_all(sender, replicas, notes) == 1);
  CHECK(sender.counters().skipped == 2);
  CHECK(replicas.held()[0].step == 50);
}

TEST_CASE("replication: when every rank's snapshot holds the whole state, one copy of each step is sent",
          "[replicate]") {
  WorkerStore rank0, rank1;
  const testing::TestCheckpoint checkpoint = testing::make_test_checkpoint(10, 0.1);
  ReplicaSender sender(true);  // the built-in trainer's snapshots
  SnapshotStores launcher;
  ReplicaStores replicas(launcher, std::uint64_t{1} << 30);
  std::vector<std::string> notes;
  sender.set_round(0, "node 0", {{0, rank0.fd.get()}, {1, rank1.fd.get()}});
  testing::put_snapshot(rank0.store, 10, checkpoint);
  testing::put_snapshot(rank1.store, 10, checkpoint);
  CHECK(send_all(sender, replicas, notes) == 1);
  CHECK(sender.counters().sent == 1);
  CHECK(sender.counters().passed_over == 1);
  CHECK(sender.counters().skipped == 0);
  testing::put_snapshot(rank0.store, 20, checkpoint);
  testing::put_snapshot(rank1.store, 20, checkpoint);
  CHECK(send_all(sender, replicas, notes) == 1);
  CHECK(sender.counters().sent == 2);
  CHECK(sender.counters().passed_over == 2);
  CHECK(sender.counters().newest_step == 20);
  // Only one rank's replica is kept, and it is of the newest step: enough to resume every rank.
  std::int64_t newest = -1;
  for (const ReplicaStores::Held& held : replicas.held()) newest = std::max(newest, held.step);
  CHECK(newest == 20);

  // Each rank's own state (a Python script's): every store is sent.
  ReplicaSender own;
  own.set_round(0, "node 0", {{0, rank0.fd.get()}, {1, rank1.fd.get()}});
  SnapshotStores launcher2;
  ReplicaStores replicas2(launcher2, std::uint64_t{1} << 30);
  send_all(own, replicas2, notes);
  CHECK(own.counters().sent == 2);
  CHECK(replicas2.held().size() == 2);
  CHECK(notes.empty());
}

TEST_CASE("replication: a snapshot overwritten while in flight is given up, the newer one sent instead",
          "[replicate]") {
  WorkerStore worker;
  const testing::TestCheckpoint large = testing::make_test_checkpoint(10, 2.5);
  ReplicaSender sender;
  SnapshotStores launcher;
  ReplicaStores replicas(launcher, std::uint64_t{1} << 30);
  std::vector<std::string> notes;
  sender.set_round(0, "node 0", {{0, worker.fd.get()}});
  testing::put_snapshot(worker.store, 10, large);
  std::optional<SnapshotPart> first = sender.next();
  REQUIRE(first);
  CHECK(first->step == 10);
  CHECK_FALSE(first->last());
  replicas.take(*first, "peer", notes);
  testing::put_snapshot(worker.store, 20, large);  // the other slot: step 10 is still whole, its transfer goes on
  std::optional<SnapshotPart> second = sender.next();
  REQUIRE(second);
  CHECK(second->step == 10);
  CHECK(second->offset == first->data.size());
  testing::put_snapshot(worker.store, 30, large);  // over step 10's slot
  std::optional<SnapshotPart> third = sender.next();
  REQUIRE(third);
  CHECK(third->step == 30);
  CHECK(third->offset == 0);
  CHECK(sender.counters().skipped == 2);  // 10 (overwritten in flight) and 20 (overtaken)
  replicas.take(*third, "peer", notes);
  CHECK(send_all(sender, replicas, notes) >= 1);
  REQUIRE(replicas.held().size() == 1);
  CHECK(replicas.held()[0].step == 30);
  CHECK(notes.empty());
}

TEST_CASE("replication: a snapshot torn on the way, or too large, is not kept, and says why", "[replicate]") {
  WorkerStore worker;
  const testing::TestCheckpoint checkpoint = testing::make_test_checkpoint(10, 0.5);
  ReplicaSender sender;
  std::vector<std::string> notes;
  sender.set_round(0, "node 1 (hostB, 10.0.0.2)", {{1, worker.fd.get()}});
  testing::put_snapshot(worker.store, 10, checkpoint);

  SECTION("a byte changed on the way: its checksum") {
    SnapshotStores launcher;
    ReplicaStores replicas(launcher, std::uint64_t{1} << 30);
    std::optional<SnapshotPart> part = sender.next();
    REQUIRE(part);
    REQUIRE(part->last());
    part->data[part->data.size() / 2] ^= 0x20;
    replicas.take(*part, "10.0.0.2:5000", notes);
    CHECK(replicas.held().empty());
    CHECK(replicas.damaged() == 1);
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Contains("dropped the snapshot of rank 1 (step 10) from node 1 (hostB, 10.0.0.2)"));
  }
  SECTION("larger than this node takes") {
    SnapshotStores launcher;
    ReplicaStores replicas(launcher, 1000);
    send_all(sender, replicas, notes);
    CHECK(replicas.held().empty());
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Contains("refused the snapshot of rank 1 (step 10)") && Contains("more than the 1000"));
  }
  SECTION("a part that does not continue the snapshot is dropped") {
    SnapshotStores launcher;
    ReplicaStores replicas(launcher, std::uint64_t{1} << 30);
    std::optional<SnapshotPart> part = sender.next();
    REQUIRE(part);
    part->offset = 1;
    part->data.pop_back();
    replicas.take(*part, "peer", notes);
    CHECK(replicas.dropped_parts() == 1);
    CHECK(replicas.held().empty());
  }
}

TEST_CASE("replication: the Python helper's images are verified by their CRC-32", "[replicate]") {
  WorkerStore worker;
  const std::string payload(300000, 'p');
  std::string image = "MGPYSNP2";
  const std::uint64_t length = payload.size();
  const auto crc = static_cast<std::uint32_t>(
      ::crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())));
  const std::int32_t writer = 0;
  image.append(reinterpret_cast<const char*>(&length), 8);
  image.append(reinterpret_cast<const char*>(&crc), 4);
  image.append(reinterpret_cast<const char*>(&writer), 4);
  image += payload;
  worker.store.write(7, image.size(), [&](unsigned char* room) { std::memcpy(room, image.data(), image.size()); });
  ReplicaSender sender;
  SnapshotStores launcher;
  ReplicaStores replicas(launcher, std::uint64_t{1} << 30);
  std::vector<std::string> notes;
  sender.set_round(0, "node 0", {{0, worker.fd.get()}});
  std::optional<SnapshotPart> part = sender.next();
  REQUIRE(part);
  SnapshotPart damaged = *part;
  damaged.data.back() = 'q';
  replicas.take(damaged, "peer", notes);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Contains("checksum mismatch"));
  replicas.take(*part, "peer", notes);
  REQUIRE(replicas.held().size() == 1);
  CHECK(replicas.held()[0].step == 7);
}

namespace {

struct NoHandler : LoopHandler {
  void on_child_exits(const std::vector<ChildExit>&, LoopTime) override {}
  void on_signal(int, LoopTime) override {}
};

// Runs the loop until `done` or 20 s.
template <typename Done>
bool run_until(EventLoop& loop, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    loop.wait_once();
  }
  return true;
}

rdzv::Assignment two_nodes(int node_rank, int buddy_port) {
  rdzv::Assignment a;
  a.round = 0;
  a.node_rank = node_rank;
  a.nproc_per_node = {1, 1};
  a.node_name = "node " + std::to_string(node_rank);
  a.buddy_host = "127.0.0.1";
  a.buddy_port = buddy_port;
  a.buddy_name = "node " + std::to_string(1 - node_rank);
  return a;
}

}  // namespace

TEST_CASE("replication: two launchers on loopback, the sender's snapshot arrives at its buddy", "[replicate]") {
  const bool with_token = GENERATE(false, true);
  rdzv::RendezvousToken token;
  if (with_token) token = {"0123456789abcdef0123456789abcdef", "test"};
  SnapshotStores launcher0, launcher1;  // each node's: its worker's store, and the replicas it holds
  SnapshotStore rank0(launcher0.fd_for(0), "rank 0"), rank1(launcher1.fd_for(0), "rank 1");
  std::vector<std::string> lines;
  auto say = [&](const std::string& line) { lines.push_back(line); };
  SnapshotReplication node0(token, launcher0, false, say);
  auto node1_owner = std::make_unique<SnapshotReplication>(token, launcher1, false, say);
  SnapshotReplication& node1 = *node1_owner;
  REQUIRE(node0.port() > 0);
  REQUIRE(node1.port() > 0);
  NoHandler handler;
  EventLoop loop(handler);
  loop.add(node0);
  loop.add(node1);
  node0.start_round(two_nodes(0, node1.port()));
  node1.start_round(two_nodes(1, node0.port()));
  testing::put_snapshot(rank0, 40, testing::make_test_checkpoint(40, 1.5));
  testing::put_snapshot(rank1, 45, testing::make_test_checkpoint(45, 0.1));
  INFO(fmt::format("{}", fmt::join(lines, "\n")));
  REQUIRE(run_until(loop, [&] { return node1.status().held.size() == 1 && node0.status().held.size() == 1; }));
  const rdzv::ReplicaStatus at1 = node1.status(), at0 = node0.status();
  CHECK(at1.held[0].rank == 0);
  CHECK(at1.held[0].step == 40);
  CHECK(at0.held[0].rank == 1);
  CHECK(at0.held[0].step == 45);
  CHECK(at0.sent == 1);
  CHECK(at0.sent_step == 40);
  CHECK(at0.buddy == "node 1");
  CHECK(at0.connected);
  CHECK(at1.received == 1);
  CHECK_THAT(node0.summary(), Contains("snapshot replication: sent 1 snapshot (") &&
                                  Contains("0 skipped), the newest of step 40; received 1 (0 damaged on the way)"));
  // The replica is in node 1's store for rank 0, the one its local rank 0 inherits, whole.
  REQUIRE(launcher1.replica_fds().size() == 1);
  CHECK(launcher1.replica_fds()[0].first == 0);
  SnapshotStore replica(launcher1.replica_fds()[0].second, "replica");
  std::vector<std::string> skipped;
  const auto newest = replica.newest(skipped);
  REQUIRE(newest);
  CHECK(newest->step == 40);
  CHECK(testing::compare_with_checkpoint(newest->image, testing::make_test_checkpoint(40, 1.5)) == "");

  // A node with another token is refused by the receiver, and says so.
  if (with_token) {
    SnapshotStores stranger_stores;
    SnapshotStore stranger_store(stranger_stores.fd_for(0), "stranger");
    SnapshotReplication stranger({"another-token-of-32-characters!!", "test"}, stranger_stores, false, say);
    loop.add(stranger);
    stranger.start_round(two_nodes(0, node1.port()));
    testing::put_snapshot(stranger_store, 99, testing::make_test_checkpoint(99, 0.1));
    REQUIRE(run_until(loop, [&] {
      for (const std::string& line : lines)
        if (line.find("closed the connection from 127.0.0.1") != std::string::npos) return true;
      return false;
    }));
    CHECK(node1.status().held[0].step == 40);
    loop.remove(stranger);
  }
  // The buddy goes away: the sender says so once, with the reason, and tries again.
  loop.remove(node1);
  node1_owner.reset();
  REQUIRE(run_until(loop, [&] {
    for (const std::string& line : lines)
      if (line.find("cannot send to node 1 at 127.0.0.1:") != std::string::npos) return true;
    return false;
  }));
  for (const std::string& line : lines) {
    if (line.find("cannot send to node 1") == std::string::npos) continue;
    CHECK_THAT(line, Contains("the connection") && Contains("; trying again every 2 s"));
  }
  loop.remove(node0);
}
