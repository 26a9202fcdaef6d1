// The rendezvous wire format: round trips of the typed messages, incremental decoding, and clear
// errors for bytes that are not the protocol (another program, another version, damaged frames).
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include <fmt/format.h>

#include "decode_one.hpp"
#include "multinode/job_fingerprint.hpp"
#include "wire/rendezvous_message.hpp"

using namespace mgtrain;
using namespace mgtrain::rdzv;
using mgtrain::rdzv::testing::decode_one;

namespace {

std::string be16(unsigned value) { return {static_cast<char>(value >> 8), static_cast<char>(value & 0xff)}; }
std::string be32(unsigned value) { return be16(value >> 16) + be16(value & 0xffff); }

std::string error_of(const std::string& bytes) {
  MessageDecoder decoder;
  decoder.feed(bytes.data(), bytes.size());
  try {
    while (decoder.next()) {}
  } catch (const ProtocolError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("join and assignment survive the wire field by field", "[rdzv][codec]") {
  JoinRequest join;
  join.version = "0.1.0";
  join.node_rank = 1;
  join.hostname = "hostB";
  join.agent_id = "hostB:4242";
  join.nproc = 4;
  join.role = "trainer";
  join.nnodes = "1:3";
  join.run_id = "job-7";
  join.run_id_generated = true;
  join.max_restarts = 2;
  join.allow_uneven_nproc = true;
  join.config_hash = "00ff";
  join.config_lines = "a.b=1\nc.d=x=y\n";
  join.cpu_sharing = "4f1e-boot/0-15";
  join.replica_port = 40123;
  JoinRequest back = JoinRequest::from(decode_one(encode(join.to_message())));
  CHECK(back.version == "0.1.0");
  CHECK(back.node_rank == 1);
  CHECK(back.hostname == "hostB");
  CHECK(back.agent_id == "hostB:4242");
  CHECK(back.nproc == 4);
  CHECK(back.role == "trainer");
  CHECK(back.nnodes == "1:3");
  CHECK(back.run_id == "job-7");
  CHECK(back.run_id_generated);
  CHECK(back.max_restarts == 2);
  CHECK(back.allow_uneven_nproc);
  CHECK(back.config_lines == join.config_lines);
  CHECK(back.replica_port == 40123);
  Message bad_port = join.to_message();
  bad_port.set("replica_port", 70000);
  CHECK_THROWS_WITH(JoinRequest::from(bad_port), Catch::Contains("replica_port 70000"));

  Assignment assignment;
  assignment.round = 3;
  assignment.restart_count = 1;
  assignment.node_rank = 2;
  assignment.nproc_per_node = {2, 3, 1};
  assignment.node_name = "node 1 (b, 10.0.0.2)";
  assignment.master_addr = "10.0.0.1";
  assignment.master_port = 41234;
  assignment.run_id = "r";
  assignment.role_first_rank = 1;
  assignment.role_world_size = 3;
  assignment.workers_sharing_cpus = 4;  // its own worker and the 3 of node 1, on the same machine
  assignment.buddy_host = "fd00::3";
  assignment.buddy_port = 40999;
  assignment.buddy_name = "node 0 (a, fd00::3)";
  Assignment a = Assignment::from(decode_one(encode(assignment.to_message())));
  CHECK(a.round == 3);
  CHECK(a.restart_count == 1);
  CHECK(a.node_rank == 2);
  CHECK(a.nproc_per_node == std::vector<int>{2, 3, 1});
  CHECK(a.node_name == assignment.node_name);
  CHECK(a.world_size() == 6);
  CHECK(a.first_rank(0) == 0);
  CHECK(a.first_rank(2) == 5);
  CHECK(a.master_port == 41234);
  CHECK(a.role_first_rank == 1);
  CHECK(a.role_world_size == 3);
  CHECK(a.workers_sharing_cpus == 4);
  CHECK(a.buddy_host == "fd00::3");
  CHECK(a.buddy_port == 40999);
  CHECK(a.buddy_name == assignment.buddy_name);
  CHECK(back.cpu_sharing == join.cpu_sharing);

  // Run-length coded on the wire: 10,000 even nodes cost a few bytes, and bad counts are refused.
  assignment.nproc_per_node = std::vector<int>(10000, 2);
  assignment.nproc_per_node.push_back(1);
  Message wire = assignment.to_message();
  CHECK(wire.text("nproc_per_node") == "2*10000,1");
  CHECK(Assignment::from(decode_one(encode(wire))).world_size() == 20001);
  assignment.nproc_per_node = {2, 3, 1};
  wire = assignment.to_message();
  for (int impossible : {0, 7}) {  // fewer than its own workers, more than the job's
    wire.set("workers_sharing_cpus", impossible);
    CHECK_THROWS_WITH(Assignment::from(wire), Catch::Contains(fmt::format("{} workers share the CPUs", impossible)));
  }
  wire.fields.erase("workers_sharing_cpus");
  CHECK_THROWS_WITH(Assignment::from(wire), Catch::Contains("without the field 'workers_sharing_cpus'"));
  wire = assignment.to_message();
  for (const char* bad : {"2*0", "0", "2*", "*3", "2*99999999999", "1,x"}) {
    wire.set("nproc_per_node", std::string(bad));
    CHECK_THROWS_AS(Assignment::from(wire), ProtocolError);
  }
}

TEST_CASE("regroup (elastic scale-up) and an assignment's restart count cross the wire, impossible counts are refused",
          "[rdzv][codec]") {
  Message regroup = decode_one(
      encode(regroup_message(4, 3, "a new node (hostC, 10.0.0.3) arrived; restarting the round with 3 nodes")));
  CHECK(regroup.type == MessageType::kRegroup);
  CHECK(type_name(regroup.type) == "regroup");
  CHECK(regroup.integer("round") == 4);
  CHECK(regroup.integer("nodes") == 3);
  CHECK(regroup.text("reason") == "a new node (hostC, 10.0.0.3) arrived; restarting the round with 3 nodes");

  Assignment assignment;
  assignment.round = 2;
  assignment.restart_count = 0;  // two scale-ups, no failure
  assignment.nproc_per_node = {1, 1};
  assignment.role_world_size = 2;
  assignment.workers_sharing_cpus = 1;
  Message wire = assignment.to_message();
  CHECK(Assignment::from(decode_one(encode(wire))).restart_count == 0);
  wire.set("restart_count", 3);  // more restarts than rounds
  CHECK_THROWS_WITH(Assignment::from(wire), Catch::Contains("restart count 3 in round 2"));
  wire.set("restart_count", -1);
  CHECK_THROWS_AS(Assignment::from(wire), ProtocolError);
  wire.fields.erase("restart_count");
  CHECK_THROWS_WITH(Assignment::from(wire), Catch::Contains("assign message without the field 'restart_count'"));
}

TEST_CASE("a failure report crosses the wire with its stderr tail", "[rdzv][codec]") {
  NodeFailure failure;
  failure.round = 1;
  failure.node_rank = 1;
  failure.node = "node 1 (hostB)";
  failure.host = "hostB";
  failure.global_rank = 3;
  failure.local_rank = 1;
  failure.pid = 777;
  failure.exit_code = 139;
  failure.signal = 11;
  failure.outcome = "signal SIGSEGV (11)";
  failure.stderr_tail = {"line one", "", "line \xff three"};
  failure.error_message = "ValueError: bad";
  NodeFailure back = NodeFailure::read_from(decode_one(encode(workers_failed_message(failure))), "cause.");
  CHECK(back.global_rank == 3);
  CHECK(back.signal == 11);
  CHECK(back.exit_code == 139);
  CHECK(back.stderr_tail == failure.stderr_tail);
  CHECK(back.error_message == "ValueError: bad");
  CHECK(back.summary() == "rank 3 (local rank 1) on node 1 (hostB): signal SIGSEGV (11)");
}

TEST_CASE("the decoder cuts a byte stream into messages however it arrives", "[rdzv][codec]") {
  std::string stream =
      encode(heartbeat_message()) + encode(stop_message(2, "rank 3 failed")) + encode(heartbeat_message());
  MessageDecoder decoder;
  std::vector<Message> got;
  for (char byte : stream) {
    decoder.feed(&byte, 1);
    while (auto message = decoder.next()) got.push_back(*message);
  }
  REQUIRE(got.size() == 3);
  CHECK(got[1].type == MessageType::kStop);
  CHECK(got[1].integer("round") == 2);
  CHECK(got[1].text("reason") == "rank 3 failed");
  CHECK(got[2].type == MessageType::kHeartbeat);
  CHECK(decoder.buffered() == 0);
}

TEST_CASE("garbage gives an error that says what arrived, at the first wrong byte", "[rdzv][codec]") {
  CHECK_THAT(error_of("GET / HTTP/1.1\r\n"), Catch::Contains("not an mgtrain rendezvous peer") &&
                                                 Catch::Contains("47 45 54 20") && Catch::Contains("'GET /") &&
                                                 Catch::Contains("'MGRV'"));
  CHECK_THAT(error_of("X"), Catch::Contains("not an mgtrain rendezvous peer"));  // one byte is enough to know
  std::string frame = encode(heartbeat_message());
  std::string newer = frame;
  newer[5] = static_cast<char>(kProtocolVersion + 1);  // a newer protocol version
  CHECK_THAT(error_of(newer), Catch::Contains(fmt::format("version {}", kProtocolVersion + 1)) &&
                                  Catch::Contains(fmt::format("speaks version {}", kProtocolVersion)) &&
                                  Catch::Contains("same mgtrain version"));
  CHECK_THAT(error_of(std::string("MGRV") + be16(kProtocolVersion) + be16(99) + be32(0)),
             Catch::Contains("unknown rendezvous message type 99"));
  CHECK_THAT(error_of(std::string("MGRV") + be16(kProtocolVersion) + be16(5) + be32(1u << 30)),
             Catch::Contains("more than the limit"));
  // one field announced, its name cut short
  CHECK_THAT(error_of(std::string("MGRV") + be16(kProtocolVersion) + be16(5) + be32(5) + be16(1) + be16(9) + "a"),
             Catch::Contains("malformed heartbeat message") && Catch::Contains("field name"));
  // a value length beyond the payload
  CHECK_THAT(
      error_of(std::string("MGRV") + be16(kProtocolVersion) + be16(5) + be32(9) + be16(1) + be16(1) + "k" + be32(100)),
      Catch::Contains("the value of 'k'"));
  // bytes after the last field
  CHECK_THAT(error_of(std::string("MGRV") + be16(kProtocolVersion) + be16(5) + be32(3) + be16(0) + "z"),
             Catch::Contains("1 bytes left"));
  // a half-received valid frame is not an error yet
  CHECK(error_of(frame.substr(0, frame.size() - 1)).empty());
}

TEST_CASE("typed accessors name the missing or malformed field", "[rdzv][codec]") {
  Message message;
  message.type = MessageType::kJoin;
  message.set("nproc", std::string("four"));
  CHECK_THROWS_WITH(message.text("version"), Catch::Contains("join message without the field 'version'"));
  CHECK_THROWS_WITH(message.integer("nproc"), Catch::Contains("field 'nproc' is not an integer: 'four'"));
  CHECK_THROWS_AS(JoinRequest::from(message), ProtocolError);
}

TEST_CASE("the job fingerprint ignores values derived from the per-node log directory, not real differences",
          "[rdzv][fingerprint]") {
  auto loaded = [](std::vector<std::string> overrides) {
    ConfigRequest request;
    request.overrides = std::move(overrides);
    return load_config(request, EnvMap{});
  };
  LoadedConfig node0 = loaded({"launch.run_id=mn", "launch.log_dir=/data/node0/runs"});
  LoadedConfig node1 = loaded({"launch.run_id=mn", "launch.log_dir=/scratch/other"});
  REQUIRE(node0.config.checkpoint.dir == "/data/node0/runs/mn/checkpoints");  // expanded per node
  REQUIRE(node1.config.checkpoint.dir == "/scratch/other/mn/checkpoints");
  CHECK(job_fingerprint(node0).hash == job_fingerprint(node1).hash);
  CHECK_THAT(job_fingerprint(node0).lines, Catch::Contains("checkpoint.dir=${log_dir}/mn/checkpoints"));
  // A checkpoint.dir that really differs (or that names the log directory's path itself) still counts.
  LoadedConfig explicit_dir =
      loaded({"launch.run_id=mn", "launch.log_dir=/scratch/other", "checkpoint.dir=/scratch/other/mn/checkpoints"});
  CHECK(job_fingerprint(explicit_dir).hash != job_fingerprint(node0).hash);
  auto differences = fingerprint_differences(job_fingerprint(explicit_dir).lines, job_fingerprint(node0).lines);
  REQUIRE(differences.size() == 1);
  CHECK(differences[0] == "checkpoint.dir: /scratch/other/mn/checkpoints vs ${log_dir}/mn/checkpoints");
  LoadedConfig derived = loaded({"launch.run_id=mn", "launch.log_dir=/b", "checkpoint.dir=${log_dir}/mn/checkpoints"});
  CHECK(job_fingerprint(derived).hash == job_fingerprint(node0).hash);
}

TEST_CASE("the job fingerprint compares what shapes the job, not per-node settings", "[rdzv][fingerprint]") {
  Config a, b;
  a.launch.run_id = "mn";
  b.launch.run_id = "20260101-000000-abcd";  // generated: the node will adopt "mn"
  a.checkpoint.dir = "runs/mn/checkpoints";
  b.checkpoint.dir = "runs/20260101-000000-abcd/checkpoints";
  CHECK(job_fingerprint(a).hash != job_fingerprint(b).hash);
  CHECK(with_adopted_run_id(job_fingerprint(b).lines, b.launch.run_id, "mn") == job_fingerprint(a).lines);
  CHECK_THAT(job_fingerprint(a).lines, Catch::Contains("data.dataset=mnist"));  // "mn" is not replaced inside "mnist"
  b.checkpoint.dir = a.checkpoint.dir;
  b.launch.node_rank = 1;                          // per node
  b.launch.gpu_ids = GpuList::parse("1").value();  // per node
  b.launch.nproc = NprocSpec::workers(4);          // compared on its own, with a better message
  CHECK(job_fingerprint(a).hash == job_fingerprint(b).hash);
  b.train.max_steps = 30;
  b.optim.lr = 0.5;
  CHECK(job_fingerprint(a).hash != job_fingerprint(b).hash);
  auto differences = fingerprint_differences(job_fingerprint(b).lines, job_fingerprint(a).lines);
  REQUIRE(differences.size() == 2);
  CHECK(differences[0] == "train.max_steps: 30 vs 0");
  CHECK(differences[1] == "optim.lr: 0.5 vs 0.01");
}
