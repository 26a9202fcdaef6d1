// Roles (torchrun's --role) across nodes: each join says its role, and every round's assignment gives each node
// the first rank and world size of its role, numbered as torch's elastic agent does (nodes in node-rank order);
// nodes of an older protocol, which do not say their role, are refused with a clear message.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "multinode/job_fingerprint.hpp"
#include "multinode/rendezvous_rounds.hpp"
#include "wire/rendezvous_message.hpp"

#include "rounds_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using namespace mgtrain::rdzv::testing;
using namespace std::chrono_literals;

namespace {

std::vector<std::pair<int, int>> pairs(const std::vector<RoleRanks>& ranks) {
  std::vector<std::pair<int, int>> out;
  for (const RoleRanks& r : ranks) out.emplace_back(r.first_rank, r.world_size);
  return out;
}

JoinRequest role_join(int node_rank, const std::string& host, int nproc, const std::string& role) {
  JoinRequest join = join_request(node_rank, host, nproc);
  join.nnodes = "3";
  join.allow_uneven_nproc = true;
  join.role = role;
  return join;
}

}  // namespace

TEST_CASE("role ranks follow node order within each role, as torch's _assign_worker_ranks", "[rdzv][roles]") {
  using P = std::vector<std::pair<int, int>>;
  // torchrun 2.15 on two nodes: {a,a} 1+1 -> role ranks 0, 1 of 2; {a,b} -> 0 of 1 each; {a,b} 2+1 -> 0-1 of 2, 0 of 1
  CHECK(pairs(role_ranks({"a", "a"}, {1, 1})) == P{{0, 2}, {1, 2}});
  CHECK(pairs(role_ranks({"a", "b"}, {1, 1})) == P{{0, 1}, {0, 1}});
  CHECK(pairs(role_ranks({"a", "b"}, {2, 1})) == P{{0, 2}, {0, 1}});
  CHECK(pairs(role_ranks({"b", "a"}, {2, 1})) == P{{0, 2}, {0, 1}});  // node order, not the roles' names
  // a role split by another: its second node goes on after the first one's workers
  CHECK(pairs(role_ranks({"a", "b", "a", "b"}, {2, 1, 3, 4})) == P{{0, 5}, {0, 5}, {2, 5}, {1, 5}});
  CHECK(pairs(role_ranks({"default"}, {4})) == P{{0, 4}});
  CHECK(role_ranks({}, {}).empty());
}

TEST_CASE("the join carries the role and the assignment the role ranks, a join without a role is refused",
          "[rdzv][roles][codec]") {
  JoinRequest join = join_request(1, "hostB");
  join.role = "reader";
  CHECK(JoinRequest::from(join.to_message()).role == "reader");
  Message old_join = join.to_message();
  old_join.fields.erase("role");
  CHECK_THROWS_WITH(JoinRequest::from(old_join), Catch::Contains("join message without the field 'role'"));

  Assignment assignment;
  assignment.node_rank = 1;
  assignment.nproc_per_node = {2, 3};
  assignment.role_first_rank = 2;
  assignment.role_world_size = 5;
  assignment.workers_sharing_cpus = 3;
  Message wire = assignment.to_message();
  Assignment back = Assignment::from(wire);
  CHECK(back.role_first_rank == 2);
  CHECK(back.role_world_size == 5);
  // ranks the node's workers cannot have: past the role, or a role larger than the job
  wire.set("role_first_rank", 3);
  CHECK_THROWS_WITH(Assignment::from(wire), Catch::Contains("role ranks 3 to 5 of 5 in a job of 5 workers"));
  wire.set("role_first_rank", 0).set("role_world_size", 6);
  CHECK_THROWS_AS(Assignment::from(wire), ProtocolError);
  wire.set("role_first_rank", -1).set("role_world_size", 5);
  CHECK_THROWS_AS(Assignment::from(wire), ProtocolError);
  wire.set("role_first_rank", 2147483647);  // no overflow on the way to the refusal
  CHECK_THROWS_AS(Assignment::from(wire), ProtocolError);
  wire.set("role_first_rank", 0).set("nproc_per_node", "1048576*4096");  // 2^32 workers: no rank could count them
  CHECK_THROWS_WITH(Assignment::from(wire), Catch::Contains("4294967296 workers"));
  wire.set("nproc_per_node", "2,3");
  wire.fields.erase("role_world_size");
  CHECK_THROWS_WITH(Assignment::from(wire), Catch::Contains("assign message without the field 'role_world_size'"));
}

TEST_CASE("a peer of protocol version 3 (before roles) is refused, naming both versions", "[rdzv][roles][codec]") {
  REQUIRE(kProtocolVersion == 9);
  std::string frame = encode(hello_message(std::string(32, 'a'), false));
  frame[4] = 0;
  frame[5] = 3;
  MessageDecoder decoder;
  decoder.feed(frame.data(), frame.size());
  CHECK_THROWS_WITH(decoder.next(),
                    Catch::Contains("the peer speaks rendezvous protocol version 3, this mgtrain "
                                    "speaks version 9: install the same mgtrain version on every node"));
}

TEST_CASE("static: three nodes of two roles and uneven nproc get torchrun's role ranks whatever the arrival order",
          "[rdzv][roles][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  // node rank: role, nproc = 0: trainer 2, 1: reader 1, 2: trainer 3; node 2 arrives first, node 0 last
  rounds.on_connect(3, "10.77.0.3", t0);
  rounds.on_message(3, role_join(2, "hostC", 3, "trainer").to_message(), t0);
  rounds.on_connect(2, "10.77.0.2", t0);
  rounds.on_message(2, role_join(1, "hostB", 1, "reader").to_message(), t0);
  rounds.on_connect(1, "127.0.0.1", t0);
  rounds.on_message(1, role_join(0, "hostA", 2, "trainer").to_message(), t0);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  Assignment a = Assignment::from(out.last(1, MessageType::kAssign));
  Assignment b = Assignment::from(out.last(2, MessageType::kAssign));
  Assignment c = Assignment::from(out.last(3, MessageType::kAssign));
  CHECK(a.first_rank(a.node_rank) == 0);  // global ranks ignore the roles
  CHECK(b.first_rank(b.node_rank) == 2);
  CHECK(c.first_rank(c.node_rank) == 3);
  CHECK(c.world_size() == 6);
  CHECK(std::make_pair(a.role_first_rank, a.role_world_size) == std::make_pair(0, 5));
  CHECK(std::make_pair(b.role_first_rank, b.role_world_size) == std::make_pair(0, 1));
  CHECK(std::make_pair(c.role_first_rank, c.role_world_size) == std::make_pair(2, 5));
  CHECK_THAT(out.notes.back(), Catch::Contains("3 nodes, 6 workers (role trainer: 5, role reader: 1)"));
}

TEST_CASE("nodes on the same CPUs are told how many workers share them", "[rdzv][threads][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(3), out, t0);
  // nodes 0 and 2 on one machine (same boot id and affinity), node 1 elsewhere; node 2 does not know its key
  auto join = [&](ConnectionId id, int node, int nproc, const std::string& key) {
    JoinRequest request = join_request(node, "host" + std::to_string(node), nproc);
    request.nnodes = "3";
    request.cpu_sharing = key;
    request.allow_uneven_nproc = true;
    rounds.on_connect(id, "10.77.0." + std::to_string(id), t0);
    rounds.on_message(id, request.to_message(), t0);
  };
  join(1, 0, 1, "boot-a/0-1");
  join(2, 1, 2, "boot-b/0-7");
  join(3, 2, 3, "boot-a/0-1");
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  CHECK(Assignment::from(out.last(1, MessageType::kAssign)).workers_sharing_cpus == 4);
  CHECK(Assignment::from(out.last(2, MessageType::kAssign)).workers_sharing_cpus == 2);
  CHECK(Assignment::from(out.last(3, MessageType::kAssign)).workers_sharing_cpus == 4);
  CHECK(workers_sharing_cpus({"k", "", "k", ""}, {1, 2, 3, 4}) == std::vector<int>{4, 2, 4, 4});
}

TEST_CASE("one role on every node: role ranks are the global ranks, and the note names no role",
          "[rdzv][roles][rounds]") {
  FakeOutbox out;
  RendezvousRounds rounds(static_settings(2), out, t0);
  two_nodes_join(rounds, t0);
  Assignment b = Assignment::from(out.last(2, MessageType::kAssign));
  CHECK(b.role_first_rank == b.first_rank(1));
  CHECK(b.role_world_size == b.world_size());
  CHECK_THAT(out.notes.back(), Catch::Contains("2 nodes, 4 workers, store"));
}

TEST_CASE("dynamic: each round numbers the roles of its own members", "[rdzv][roles][rounds][dynamic]") {
  FakeOutbox out;
  RendezvousRounds rounds(dynamic_settings(2, 3, 1), out, t0);
  auto join = [&](ConnectionId id, const std::string& host, const std::string& role) {
    JoinRequest request = dynamic_join(host);
    request.role = role;
    rounds.on_connect(id, "10.77.0." + std::to_string(id), t0);
    rounds.on_message(id, request.to_message(), t0);
  };
  join(1, "hostA", "trainer");
  join(2, "hostB", "trainer");
  join(3, "hostC", "reader");
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  Assignment a = Assignment::from(out.last(1, MessageType::kAssign));
  CHECK(std::make_pair(a.role_first_rank, a.role_world_size) == std::make_pair(0, 4));
  CHECK(Assignment::from(out.last(2, MessageType::kAssign)).role_first_rank == 2);
  // hostB goes: the restart has hostA (trainer) and hostC (reader), and hostA's role has 2 workers now
  rounds.on_disconnect(2, "closed the connection", t0 + 1s);
  rounds.on_message(1, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  rounds.on_message(3, workers_ended_message(0, kEndedStopped, 0), t0 + 2s);
  REQUIRE(rounds.phase() == RendezvousRounds::Phase::kRunning);
  a = Assignment::from(out.last(1, MessageType::kAssign));
  Assignment c = Assignment::from(out.last(3, MessageType::kAssign));
  CHECK(a.round == 1);
  CHECK(std::make_pair(a.role_first_rank, a.role_world_size) == std::make_pair(0, 2));
  CHECK(c.node_rank == 1);
  CHECK(std::make_pair(c.role_first_rank, c.role_world_size) == std::make_pair(0, 2));
}

TEST_CASE(
    "with --allow-uneven-nproc only nproc and roles may differ: max_restarts, config and the flag still must agree",
    "[rdzv][roles][rounds]") {
  // node 0: trainer, 2 workers, uneven allowed; node 1 differs in `change` as well as in nproc and role
  auto outcome = [](const std::function<void(JoinRequest&)>& change) {
    FakeOutbox out;
    RendezvousRounds rounds(static_settings(2), out, t0);
    JoinRequest node0 = join_request(0, "hostA", 2), node1 = join_request(1, "hostB", 1);
    node0.allow_uneven_nproc = node1.allow_uneven_nproc = true;
    node0.role = "trainer";
    node1.role = "reader";
    change(node1);
    rounds.on_connect(1, "127.0.0.1", t0);
    rounds.on_message(1, node0.to_message(), t0);
    rounds.on_connect(2, "10.77.0.2", t0);
    rounds.on_message(2, node1.to_message(), t0);
    if (rounds.phase() == RendezvousRounds::Phase::kRunning) return std::string("running");
    REQUIRE(rounds.finished());
    return out.last(2, MessageType::kReject).text("text");
  };
  CHECK(outcome([](JoinRequest&) {}) == "running");
  CHECK(outcome([](JoinRequest& j) { j.max_restarts = 3; }) ==
        "node 1 (hostB, 10.77.0.2) has --max-restarts 3, node 0 (hostA) has --max-restarts 0; pass the same "
        "--max-restarts on every node");
  CHECK(outcome([](JoinRequest& j) { j.allow_uneven_nproc = false; }) ==
        "node 1 (hostB, 10.77.0.2) has no --allow-uneven-nproc, node 0 (hostA) has --allow-uneven-nproc; pass the "
        "same flags on every node");
  Config changed;
  changed.train.max_steps = 30;
  CHECK_THAT(outcome([&](JoinRequest& j) {
               j.config_lines = job_fingerprint(changed).lines;
               j.config_hash = job_fingerprint(changed).hash;
             }),
             Catch::Contains("runs a different config than node 0 (hostA) (train.max_steps: 30 vs 0"));
}
