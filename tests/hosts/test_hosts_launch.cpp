// --hosts/--hostfile: which hosts (the parsed list or the hostfile, a real file), the remote command line and what
// every agent is told. The host list grammar itself is tested with the other typed settings (test_launch_settings).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hosts/hosts_launch.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

std::vector<HostSlots> hosts(const std::string& text) { return HostList::parse(text).value().hosts; }

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("the hosts to start: the parsed --hosts, or the hostfile read at launch time", "[hosts]") {
  LaunchConfig launch;
  launch.hosts = HostList::parse("a:2,b:3").value();
  CHECK(hosts_of(launch) == hosts("a:2,b:3"));
  const testing::TempDir dir("mgtrain-hostfile");
  const std::string file = write_file(dir / "hosts.txt", "# the cluster\nnode0 slots=8\nnode1\n");
  launch.hostfile = file;
  CHECK_THROWS_WITH(hosts_of(launch), Catch::Contains("either with --hosts or with --hostfile, not both"));
  launch.hosts = {};
  CHECK(hosts_of(launch) == std::vector<HostSlots>{{"node0", 8}, {"node1", 0}});
  std::remove(file.c_str());
  CHECK_THROWS_WITH(hosts_of(launch), Catch::Contains(file + ": cannot read the hostfile"));
  launch.hostfile = "/dev/zero";  // bounded like a config file (config/config_file.hpp)
  CHECK_THROWS_WITH(hosts_of(launch), Catch::Contains("/dev/zero: is a character device, expected a hostfile"));
  const std::string bad = write_file(dir / "bad.txt", "node0 slots=8\nnode1 gpus=8\n");
  launch.hostfile = bad;
  CHECK_THROWS_WITH(hosts_of(launch), bad + ":2: unexpected 'gpus=8': write lines like `node0 slots=4`");
}

TEST_CASE("the remote command: template words with {host}, then one shell-quoted command line", "[hosts]") {
  CHECK(shell_quote("it's") == "'it'\\''s'");
  std::string line = agent_command_line("/work dir", "/opt/bin/mgtrain", {"--nnodes", "2", "train.lr=0.1", "a b"});
  CHECK(line == "cd '/work dir' && exec '/opt/bin/mgtrain' launch '--nnodes' '2' 'train.lr=0.1' 'a b'");
  CHECK(remote_agent_argv("ssh {host}", "node1", line) == std::vector<std::string>{"ssh", "node1", line});
  CHECK(remote_agent_argv("ip netns exec {host} sh -c", "ns1", line) ==
        std::vector<std::string>{"ip", "netns", "exec", "ns1", "sh", "-c", line});
  CHECK(remote_agent_argv("ssh -p 2222 user@{host}", "n", "x") ==
        std::vector<std::string>{"ssh", "-p", "2222", "user@n", "x"});
}

TEST_CASE("every agent gets its node rank, node 0's address, the run id and the user's settings", "[hosts]") {
  LaunchRequest request;
  request.config.path = "configs/x.yaml";
  request.config.overrides = {"train.epochs=2"};
  request.config.flags = {{"launch.hosts", "a:2,b:3", "--hosts"},
                          {"launch.max_restarts", "1", "--max-restarts"},
                          {"launch.nproc", "9", "--nproc"}};
  LoadedConfig loaded;
  loaded.config.launch.run_id = "r1";
  loaded.origin["launch.run_id"] = "generated";
  loaded.origin["optim.lr"] = "environment MGTRAIN_OPTIM_LR";
  EnvMap environment = {{"MGTRAIN_OPTIM_LR", "0.5"}};
  auto args = agent_launch_arguments(hosts("a:2,user@b:3"), request, loaded, environment);
  REQUIRE(args.size() == 2);
  const std::vector<std::string> expected = {"--nnodes",
                                             "2",
                                             "--node-rank",
                                             "1",
                                             "--master-addr",
                                             "a",
                                             "--master-port",
                                             "29500",
                                             "--run-id",
                                             "r1",
                                             "--exit-with-stdin",
                                             "--rdzv-token-file",
                                             "-",
                                             "--nproc",
                                             "3",
                                             "--allow-uneven-nproc",
                                             "--console-dedup",  // 5 ranks in the job (hosts_console.hpp)
                                             "--set",
                                             "optim.lr=0.5",
                                             "--set",
                                             "train.epochs=2",
                                             "--set",
                                             "launch.max_restarts=1",
                                             "configs/x.yaml"};
  CHECK(args[1] == expected);  // the hosts' slots win over --nproc; MGTRAIN_* settings travel as --set
  request.command = {"python3", "train.py"};
  loaded.origin["launch.master_addr"] = "--master-addr 10.0.0.1";
  loaded.config.launch.master_addr = "10.0.0.1";
  args = agent_launch_arguments(hosts("a,b"), request, loaded, environment);
  CHECK(args[0][5] == "10.0.0.1");
  CHECK(std::vector<std::string>(args[0].end() - 3, args[0].end()) ==
        std::vector<std::string>{"--", "python3", "train.py"});
  CHECK(std::find(args[0].begin(), args[0].end(), "launch.nproc=9") != args[0].end());  // no slots: --nproc applies
  loaded.origin["launch.nnodes"] = "--nnodes 3";
  loaded.config.launch.nnodes = NodeRange::exactly(3);
  CHECK_THROWS_WITH(agent_launch_arguments(hosts("a,b"), request, loaded, environment),
                    Catch::Contains("launch.nnodes is 3 but the host list names 2 hosts"));
}
