// The torchrun personality's defaults in the config loader (config_loader.cpp): keys no source set take torchrun's
// values (allow_uneven_nproc, slurm off, run.py run()'s master_addr/master_port rules); `mgtrain launch` keeps its own.
#include <catch2/catch.hpp>

#include "config/config_loader.hpp"

using namespace mgtrain;

namespace {

LoadedConfig load(std::vector<FlagSetting> flags, Personality personality = Personality::Torchrun) {
  ConfigRequest request;
  request.flags = std::move(flags);
  request.personality = personality;
  LoadOptions options;
  options.make_run_id = [] { return std::string("run-x"); };
  return load_config_text("", "", request, {}, options);
}

}  // namespace

TEST_CASE("torchrun personality: a single node without --master-port is localhost on a free port", "[config]") {
  LoadedConfig torchrun = load({{"launch.master_addr", "10.0.0.9", "--master-addr"}});
  CHECK(torchrun.config.launch.master_addr == "localhost");  // torchrun ignores --master-addr here
  CHECK(torchrun.config.launch.master_port == 0);
  CHECK_THAT(torchrun.origin_of("launch.master_addr"), Catch::Contains("torchrun's single-node rendezvous"));

  LoadedConfig local_addr = load({{"launch.local_addr", "127.0.0.3", "--local-addr"}});
  CHECK(local_addr.config.launch.master_addr == "127.0.0.3");

  LoadedConfig standalone =
      load({{"launch.standalone", "true", "--standalone"}, {"launch.master_port", "1234", "--master-port"}});
  CHECK(standalone.config.launch.master_addr == "localhost");
  CHECK(standalone.config.launch.master_port == 0);

  LoadedConfig mgtrain = load({}, Personality::Mgtrain);
  CHECK(mgtrain.config.launch.master_addr == "127.0.0.1");
  CHECK(mgtrain.origin_of("launch.master_addr") == "default");
}

TEST_CASE("torchrun personality: --master-port keeps --master-addr, several static nodes default to 29500",
          "[config]") {
  LoadedConfig port =
      load({{"launch.master_addr", "10.0.0.9", "--master-addr"}, {"launch.master_port", "29555", "--master-port"}});
  CHECK(port.config.launch.master_addr == "10.0.0.9");
  CHECK(port.config.launch.master_port == 29555);

  LoadedConfig nodes = load({{"launch.nnodes", "2", "--nnodes"}, {"launch.node_rank", "1", "--node-rank"}});
  CHECK(nodes.config.launch.master_port == 29500);
  CHECK(nodes.config.launch.master_addr == "127.0.0.1");
  CHECK(load({{"launch.nnodes", "2", "--nnodes"}}, Personality::Mgtrain).config.launch.master_port == 0);

  LoadedConfig endpoint = load({{"launch.rdzv_endpoint", "localhost:0", "--rdzv-endpoint"}});
  CHECK(endpoint.config.launch.master_port == 0);
  CHECK(endpoint.origin_of("launch.master_addr") == "default");  // the endpoint decides (launch_plan)
}

TEST_CASE("torchrun personality: uneven nproc allowed, SLURM ignored, explicit values kept", "[config]") {
  LoadedConfig torchrun = load({});
  CHECK(torchrun.config.launch.allow_uneven_nproc);
  CHECK(torchrun.config.launch.slurm == SlurmMode::Off);
  CHECK_THAT(torchrun.origin_of("launch.slurm"), Catch::Contains("torchrun"));

  LoadedConfig mgtrain = load({}, Personality::Mgtrain);
  CHECK_FALSE(mgtrain.config.launch.allow_uneven_nproc);
  CHECK(mgtrain.config.launch.slurm == SlurmMode::Auto);

  LoadedConfig given = load({{"launch.allow_uneven_nproc", "false", "--set"}, {"launch.slurm", "auto", "--slurm"}});
  CHECK_FALSE(given.config.launch.allow_uneven_nproc);
  CHECK(given.config.launch.slurm == SlurmMode::Auto);
}

TEST_CASE("launch.signals_to_handle accepts the six signals only", "[config]") {
  CHECK(load({{"launch.signals_to_handle", "SIGTERM, SIGUSR1", "--signals-to-handle"}})
            .config.launch.signals_to_handle.text() == "SIGTERM,SIGUSR1");
  CHECK_THROWS_WITH(load({{"launch.signals_to_handle", "SIGTERM,SIGALRM", "--signals-to-handle"}}),
                    Catch::Contains("SIGALRM"));
}

TEST_CASE("torchrun personality: a single node's generated run id is a uuid4, as torchrun's run()", "[config]") {
  ConfigRequest request;
  request.personality = Personality::Torchrun;
  const std::string uuid = load_config_text("", "", request, {}, {}).config.launch.run_id;
  REQUIRE(uuid.size() == 36);
  CHECK(uuid[8] == '-');
  CHECK(uuid[14] == '4');  // version 4
  CHECK(std::string("89ab").find(uuid[19]) != std::string::npos);
  CHECK(uuid != load_config_text("", "", request, {}, {}).config.launch.run_id);
  request.personality = Personality::Mgtrain;
  CHECK(load_config_text("", "", request, {}, {}).config.launch.run_id.size() != 36);  // 20261127-153023-8c2a
}
