// Roles and uneven worker counts across nodes, with real node agents on loopback: two agents of one job with
// different --role and --nproc-per-node, a shell worker that writes its environment, and the ranks compared
// variable by variable with what torch 2.15's torchrun gives for the same two nodes (when its venv exists), under
// `mgtrain launch` and the torchrun personality. Also: uneven nproc refused without --allow-uneven-nproc, and an
// agent that meets a rendezvous server of the previous protocol version refused with a clear message.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "integration/launch_fixture.hpp"

using namespace mgtrain::testing;
using namespace std::chrono_literals;

namespace {

enum class Launcher { kTorchrun, kMgtrainLaunch, kMgtrainTorchrun };

const char* name_of(Launcher launcher) {
  switch (launcher) {
    case Launcher::kTorchrun:
      return "torch 2.15 torchrun";
    case Launcher::kMgtrainLaunch:
      return "mgtrain launch";
    case Launcher::kMgtrainTorchrun:
      return "mgtrain torchrun";
  }
  return "";
}

std::string torchrun_path() { return std::string(MGTRAIN_TORCH2_VENV) + "/bin/torchrun"; }

const std::vector<std::string> kCompared = {
    "RANK",       "LOCAL_RANK",       "ROLE_NAME",        "ROLE_RANK", "ROLE_WORLD_SIZE",
    "GROUP_RANK", "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE", "WORLD_SIZE"};

// One agent of the job: its role and number of workers; `node_rank` >= 0: a static job (--node-rank); `flags`:
// more flags for mgtrain's agents (torchrun gets none).
struct NodeSpec {
  std::string role;
  int nproc = 1;
  int node_rank = -1;
  std::vector<std::string> flags = {};
};

struct PairRun {
  int code_a = -1, code_b = -1;
  std::string console;                                        // both agents' stdout and stderr
  std::map<int, std::map<std::string, std::string>> workers;  // by RANK: the compared variables
};

std::map<std::string, std::string> read_fields(const std::string& path) {
  std::map<std::string, std::string> fields;
  for (const std::string& line : mgtrain::split_lines(read_text(path))) {
    const std::size_t equals = line.find('=');
    if (equals != std::string::npos) fields[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return fields;
}

// Whether something listens on 127.0.0.1:`port` (the first agent's rendezvous, or torch's store).
bool accepts_connections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool open = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return open;
}

std::vector<std::string> agent_argv(Launcher launcher, const NodeSpec& node, int port, const std::string& worker) {
  std::vector<std::string> argv;
  if (launcher == Launcher::kTorchrun) argv = {torchrun_path()};
  if (launcher == Launcher::kMgtrainLaunch) argv = {kMgtrain, "launch", "--join-timeout", "30"};
  if (launcher == Launcher::kMgtrainTorchrun) argv = {kMgtrain, "torchrun"};
  argv.insert(argv.end(), {"--nnodes", "2", "--nproc-per-node", std::to_string(node.nproc), "--role", node.role});
  if (node.node_rank >= 0) {
    argv.insert(argv.end(), {"--rdzv-backend", "static", "--node-rank", std::to_string(node.node_rank), "--master-addr",
                             "127.0.0.1", "--master-port", std::to_string(port)});
  } else {
    argv.insert(argv.end(), {"--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:" + std::to_string(port)});
  }
  if (launcher != Launcher::kTorchrun) argv.insert(argv.end(), node.flags.begin(), node.flags.end());
  argv.insert(argv.end(), {"--no-python", worker});
  return argv;
}

// Runs agents `a` and `b` of one two-node job (`a` first: dynamic, it hosts the rendezvous and becomes node 0, as
// torchrun's agent with the lower process id does) in their own directories under `dir`/`name`.
PairRun run_pair(Launcher launcher, const TempDir& dir, const std::string& name, const NodeSpec& a, const NodeSpec& b) {
  const std::string base = dir / name;
  std::filesystem::create_directories(base + "/out");
  std::filesystem::create_directories(base + "/a");
  std::filesystem::create_directories(base + "/b");
  const std::string worker = write_script(
      base + "/dump.sh",
      "for name in RANK LOCAL_RANK ROLE_NAME ROLE_RANK ROLE_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE LOCAL_WORLD_SIZE "
      "WORLD_SIZE; do eval echo \"$name=\\$$name\"; done > \"$ENV_OUT/rank_$RANK\"");
  const int port = free_port();
  auto start = [&](const NodeSpec& node, const std::string& which) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", base + "/" + which};
    const std::vector<std::string> agent = agent_argv(launcher, node, port, worker);
    argv.insert(argv.end(), agent.begin(), agent.end());
    return start_process(argv, base + "/" + which, {{"ENV_OUT", base + "/out"}});
  };
  ChildProcess first = start(a, "a");
  // Dynamic: mgtrain's `a` must host before `b` looks for the endpoint (static: node 1 may well start first).
  // torchrun orders its nodes by process id: `a`, started first, is node 0 however late its store comes up.
  if (a.node_rank < 0 && launcher != Launcher::kTorchrun) wait_until([&] { return accepts_connections(port); }, 20s);
  ChildProcess second = start(b, "b");
  PairRun run;
  run.code_a = wait_for_exit(first.pid, 50s).value_or(-1);
  run.code_b = wait_for_exit(second.pid, 10s).value_or(-1);
  for (pid_t pid : {first.pid, second.pid}) {
    if (kill(pid, 0) == 0) kill(pid, SIGKILL);  // a hung agent fails the test, not the next one
  }
  run.console =
      read_text(first.out_path) + read_text(first.err_path) + read_text(second.out_path) + read_text(second.err_path);
  for (const auto& entry : std::filesystem::directory_iterator(base + "/out")) {
    auto fields = read_fields(entry.path().string());
    run.workers[std::stoi(fields["RANK"])] = fields;
  }
  return run;
}

// The workers' variables torch 2.15's torchrun gives, as "RANK ROLE_NAME ROLE_RANK ROLE_WORLD_SIZE GROUP_RANK
// LOCAL_RANK LOCAL_WORLD_SIZE" per rank (seen with two torchrun agents on loopback; the test also compares with
// the real torchrun when its venv exists).
using Expected = std::vector<std::vector<std::string>>;

void check_workers(const PairRun& run, const Expected& expected, const std::string& world_size) {
  INFO(run.console);
  REQUIRE(run.code_a == 0);
  REQUIRE(run.code_b == 0);
  REQUIRE(run.workers.size() == expected.size());
  for (const auto& row : expected) {
    const int rank = std::stoi(row[0]);
    REQUIRE(run.workers.count(rank) == 1);
    const auto& got = run.workers.at(rank);
    INFO("rank " << rank);
    CHECK(got.at("ROLE_NAME") == row[1]);
    CHECK(got.at("ROLE_RANK") == row[2]);
    CHECK(got.at("ROLE_WORLD_SIZE") == row[3]);
    CHECK(got.at("GROUP_RANK") == row[4]);
    CHECK(got.at("LOCAL_RANK") == row[5]);
    CHECK(got.at("LOCAL_WORLD_SIZE") == row[6]);
    CHECK(got.at("WORLD_SIZE") == world_size);
    CHECK(got.at("GROUP_WORLD_SIZE") == "2");
  }
}

// Every launcher gives `expected` (mgtrain's agents get each node's `flags`: torchrun accepts uneven nproc as it is).
void check_all(const std::string& label, const NodeSpec& a, const NodeSpec& b, const Expected& expected,
               const std::string& world_size) {
  TempDir dir;
  std::map<Launcher, PairRun> runs;
  for (Launcher launcher : {Launcher::kMgtrainLaunch, Launcher::kMgtrainTorchrun, Launcher::kTorchrun}) {
    if (launcher == Launcher::kTorchrun && access(torchrun_path().c_str(), X_OK) != 0) {
      WARN("torchrun comparison skipped: no torch 2.15 venv at " << MGTRAIN_TORCH2_VENV
                                                                 << " (scripts/torch2-env.sh creates it)");
      continue;
    }
    INFO(label << " under " << name_of(launcher));
    runs[launcher] = run_pair(launcher, dir, label + "-" + std::to_string(static_cast<int>(launcher)), a, b);
    check_workers(runs[launcher], expected, world_size);
  }
  if (!runs.count(Launcher::kTorchrun)) return;
  // variable by variable, every rank: what torchrun's workers saw is what mgtrain's saw
  for (Launcher launcher : {Launcher::kMgtrainLaunch, Launcher::kMgtrainTorchrun}) {
    for (const auto& [rank, torch_fields] : runs[Launcher::kTorchrun].workers) {
      for (const std::string& variable : kCompared) {
        INFO(label << ", rank " << rank << ", " << variable << ": " << name_of(launcher) << " vs torchrun");
        CHECK(runs[launcher].workers[rank][variable] == torch_fields.at(variable));
      }
    }
  }
}

}  // namespace

TEST_CASE("roles: two nodes of one role number their ranks across both nodes", "[multinode][roles]") {
  check_all("aa", {"a", 1}, {"a", 1}, {{"0", "a", "0", "2", "0", "0", "1"}, {"1", "a", "1", "2", "1", "0", "1"}}, "2");
}

TEST_CASE("roles: two nodes of two roles each have role rank 0 of 1", "[multinode][roles]") {
  check_all("ab", {"a", 1}, {"b", 1}, {{"0", "a", "0", "1", "0", "0", "1"}, {"1", "b", "0", "1", "1", "0", "1"}}, "2");
}

TEST_CASE("roles and uneven nproc (2 and 1): global ranks in node order, role ranks within each role",
          "[multinode][roles][uneven]") {
  const std::vector<std::string> uneven = {"--allow-uneven-nproc"};
  check_all(
      "a2b1", {"a", 2, -1, uneven}, {"b", 1, -1, uneven},
      {{"0", "a", "0", "2", "0", "0", "2"}, {"1", "a", "1", "2", "0", "1", "2"}, {"2", "b", "0", "1", "1", "0", "1"}},
      "3");
}

TEST_CASE("roles and uneven nproc (1 and 2): node 1's first rank is node 0's worker count",
          "[multinode][roles][uneven]") {
  const std::vector<std::string> uneven = {"--allow-uneven-nproc"};
  check_all(
      "a1b2", {"a", 1, -1, uneven}, {"b", 2, -1, uneven},
      {{"0", "a", "0", "1", "0", "0", "1"}, {"1", "b", "0", "2", "1", "0", "2"}, {"2", "b", "1", "2", "1", "1", "2"}},
      "3");
}

TEST_CASE("static rendezvous: node rank 1 started first, uneven nproc, the ranks follow --node-rank",
          "[multinode][roles][uneven]") {
  const std::vector<std::string> uneven = {"--allow-uneven-nproc"};
  check_all(
      "static", {"a", 1, 1, uneven}, {"b", 2, 0, uneven},
      {{"0", "b", "0", "2", "0", "0", "2"}, {"1", "b", "1", "2", "0", "1", "2"}, {"2", "a", "0", "1", "1", "0", "1"}},
      "3");
}

TEST_CASE("uneven nproc without --allow-uneven-nproc, or with it on one node only, is refused on both nodes",
          "[multinode][uneven]") {
  TempDir dir;
  PairRun refused = run_pair(Launcher::kMgtrainLaunch, dir, "refused", {"a", 2}, {"a", 1});
  INFO(refused.console);
  CHECK(refused.code_a == 2);
  CHECK(refused.code_b == 2);
  CHECK(refused.workers.empty());
  CHECK_THAT(refused.console, Catch::Contains("has --nproc 1, the agent on ") &&
                                  Catch::Contains("has --nproc 2; pass the same --nproc on every node, or "
                                                  "--allow-uneven-nproc"));
  // the flag is compared too: a node without it would refuse what the other accepts
  PairRun one_sided =
      run_pair(Launcher::kMgtrainLaunch, dir, "one-sided", {"a", 2}, {"a", 1, -1, {"--allow-uneven-nproc"}});
  INFO(one_sided.console);
  CHECK(one_sided.code_a == 2);
  CHECK(one_sided.code_b == 2);
  CHECK(one_sided.workers.empty());
  CHECK_THAT(one_sided.console, Catch::Contains("has --allow-uneven-nproc, the agent on ") &&
                                    Catch::Contains("has no --allow-uneven-nproc; pass the same flags on every node"));
}

TEST_CASE(
    "an agent that meets a rendezvous server of protocol version 3 (before roles) stops with exit code 2 "
    "and says why",
    "[multinode][protocol]") {
  int port = 0;
  const int listener = listening_socket(port);
  REQUIRE(listener >= 0);
  // An mgtrain of protocol 3 greets every connection with its hello: a header "MGRV", version 3, type 12
  // (hello), payload length 2, and a payload of no fields.
  const std::string old_hello = std::string("MGRV", 4) + std::string("\x00\x03\x00\x0c\x00\x00\x00\x02\x00\x00", 10);
  std::thread server([&] {
    const int connection = accept(listener, nullptr, nullptr);
    if (connection < 0) return;
    (void)!write(connection, old_hello.data(), old_hello.size());
    char buffer[4096];
    while (read(connection, buffer, sizeof buffer) > 0) {}  // until the agent goes
    close(connection);
  });
  TempDir dir;
  ChildProcess agent = start_process(
      {kMgtrain, "launch", "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port",
       std::to_string(port), "--join-timeout", "20", "--log-dir", dir / "runs", "--", "true"},
      dir / "agent");
  const std::optional<int> code = wait_for_exit(agent.pid, 30s);
  if (!code) kill(agent.pid, SIGKILL);
  shutdown(listener, SHUT_RDWR);
  server.join();
  close(listener);
  const std::string console = read_text(agent.err_path);
  INFO(console);
  REQUIRE(code);
  CHECK(*code == 2);
  CHECK_THAT(console, Catch::Contains("the peer speaks rendezvous protocol version 3, this mgtrain speaks version 9: "
                                      "install the same mgtrain version on every node"));
}
