// Command-line parsing of every subcommand, including torchrun's spellings and the launch forms.
#include <catch2/catch.hpp>

#include "cli/cli.hpp"
#include "cli_parsing.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

TEST_CASE("launch with a config, flags before and after, and bare overrides", "[cli]") {
  auto r = launch({"--nproc", "4", "configs/a.yaml", "train.batch_size=8", "--max-restarts=2", "optim.lr=0.1"});
  REQUIRE(r.config.path == std::optional<std::string>("configs/a.yaml"));
  CHECK(r.command.empty());
  CHECK(flag_value(r, "launch.nproc") == "4");
  CHECK(flag_value(r, "launch.max_restarts") == "2");
  CHECK(r.config.overrides == std::vector<std::string>{"train.batch_size=8", "optim.lr=0.1"});
}

TEST_CASE("overrides without a config run the built-in trainer on the defaults", "[cli]") {
  auto r = launch({"--nproc", "2", "model.type=mlp", "train.epochs=1"});
  CHECK_FALSE(r.config.path);
  CHECK(r.command.empty());
  CHECK(r.config.overrides == std::vector<std::string>{"model.type=mlp", "train.epochs=1"});
  auto program = launch({"./prog", "a.b=c"});  // after a program, everything is the program's
  CHECK(program.command == std::vector<std::string>{"./prog", "a.b=c"});
}

TEST_CASE("torchrun's spellings are aliases", "[cli]") {
  auto r = launch({"--nproc_per_node=2",
                   "--node_rank",
                   "1",
                   "--nnodes",
                   "2",
                   "--master_addr",
                   "h",
                   "--master_port",
                   "29500",
                   "--rdzv_id",
                   "job7",
                   "--max_restarts",
                   "3",
                   "--log_dir",
                   "L",
                   "--redirects",
                   "3",
                   "--tee",
                   "1",
                   "--local_ranks_filter",
                   "0",
                   "--monitor_interval",
                   "0.1",
                   "--standalone",
                   "c.yml"});
  CHECK(flag_value(r, "launch.nproc") == "2");
  CHECK(flag_value(r, "launch.node_rank") == "1");
  CHECK(flag_value(r, "launch.master_addr") == "h");
  CHECK(flag_value(r, "launch.master_port") == "29500");
  CHECK(flag_value(r, "launch.run_id") == "job7");
  CHECK(flag_value(r, "launch.max_restarts") == "3");
  CHECK(flag_value(r, "launch.log_dir") == "L");
  CHECK(flag_value(r, "launch.redirect") == "3");
  CHECK(flag_value(r, "launch.tee") == "1");
  CHECK(flag_value(r, "launch.local_ranks_filter") == "0");
  CHECK(flag_value(r, "launch.standalone") == "true");
  for (const auto& f : r.config.flags)
    if (f.key == "launch.nproc") CHECK(f.flag == "--nproc_per_node");
}

TEST_CASE("multi-node flags: torchrun's rendezvous spellings and mgtrain's own", "[cli][multinode]") {
  auto r = launch({"--nnodes", "1:4", "--rdzv_endpoint", "node0:29400", "--rdzv-backend", "c10d", "--rdzv-id", "job7",
                   "--join_timeout", "60", "--last-call-timeout", "5", "--node-timeout", "10",
                   "--node_heartbeat_interval", "2", "--allow-uneven-nproc", "c.yml"});
  CHECK(flag_value(r, "launch.nnodes") == "1:4");
  CHECK(flag_value(r, "launch.rdzv_endpoint") == "node0:29400");
  CHECK(flag_value(r, "launch.rdzv_backend") == "c10d");
  CHECK(flag_value(r, "launch.run_id") == "job7");
  CHECK(flag_value(r, "launch.join_timeout") == "60");
  CHECK(flag_value(r, "launch.last_call_timeout") == "5");
  CHECK(flag_value(r, "launch.node_timeout") == "10");
  CHECK(flag_value(r, "launch.node_heartbeat_interval") == "2");
  CHECK(flag_value(r, "launch.allow_uneven_nproc") == "true");
  auto hosts =
      launch({"--hosts", "a:4,b:4", "--remote-shell", "ip netns exec {host} sh -c", "--exit-with-stdin", "c.yml"});
  CHECK(flag_value(hosts, "launch.hosts") == "a:4,b:4");
  CHECK(flag_value(hosts, "launch.remote_shell") == "ip netns exec {host} sh -c");
  CHECK(flag_value(hosts, "launch.exit_with_stdin") == "true");
  CHECK(flag_value(launch({"--hostfile", "h.txt", "c.yml"}), "launch.hostfile") == "h.txt");
}

TEST_CASE("mgtrain torchrun is launch in torchrun's personality, launch stays mgtrain's", "[cli][torchrun]") {
  const CliRequest as_torchrun = parse_cli({"torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"});
  const auto* r = std::get_if<LaunchRequest>(&as_torchrun);
  REQUIRE(r != nullptr);
  CHECK(r->config.personality == Personality::Torchrun);
  CHECK(r->run_under_python);
  CHECK(flag_value(*r, "launch.nproc") == "2");
  CHECK(launch({"--nproc", "2", "train.py"}).config.personality == Personality::Mgtrain);
  CHECK_THROWS_AS(parse_cli({"torchrun", "--bogus", "train.py"}), UsageError);
}

TEST_CASE("a program after -- keeps all its arguments", "[cli]") {
  auto r = launch({"--nproc", "2", "--", "python3", "train.py", "--nproc", "9", "a=b"});
  CHECK(r.command == std::vector<std::string>{"python3", "train.py", "--nproc", "9", "a=b"});
  CHECK_FALSE(r.config.path);
  CHECK_FALSE(r.run_under_python);
  auto with_config = launch({"c.yaml", "train.epochs=2", "--", "prog"});
  CHECK(with_config.config.path == std::optional<std::string>("c.yaml"));
  CHECK(with_config.command == std::vector<std::string>{"prog"});
}

TEST_CASE("a .py script runs under python like torchrun, unless --no-python, and -m runs a module", "[cli]") {
  auto r = launch({"--nproc_per_node", "2", "train.py", "--lr", "0.1"});
  CHECK(r.run_under_python);
  CHECK(r.command == std::vector<std::string>{"-u", "train.py", "--lr", "0.1"});
  auto direct = launch({"--no-python", "train.py"});
  CHECK_FALSE(direct.run_under_python);
  CHECK(direct.command == std::vector<std::string>{"train.py"});
  auto module = launch({"-m", "pkg.train", "--x"});
  CHECK(module.run_under_python);
  CHECK(module.command == std::vector<std::string>{"-u", "-m", "pkg.train", "--x"});
  auto binary = launch({"./a.out", "x"});
  CHECK_FALSE(binary.run_under_python);
  CHECK(binary.command == std::vector<std::string>{"./a.out", "x"});
}

TEST_CASE("launch usage errors name the problem", "[cli][errors]") {
  CHECK(usage_error({"launch", "--nprc", "2", "c.yaml"}) ==
        "launch: unknown flag --nprc (did you mean --nproc?)\nRun 'mgtrain launch --help' for the flags.");
  CHECK(usage_error({"launch"}).find("launch: give a config") == 0);
  CHECK(usage_error({"launch", "--nproc"}) == "launch: --nproc needs a value");
  CHECK(usage_error({"launch", "--"}).find("nothing follows --") != std::string::npos);
  CHECK(usage_error({"launch", "c.yaml", "stray"}).find("unexpected argument 'stray' after c.yaml") !=
        std::string::npos);
  CHECK(usage_error({"launch", "-m", "--no-python", "x"}) == "launch: -m and --no-python cannot be combined");
}

TEST_CASE("top-level usage errors", "[cli][errors]") {
  CHECK(usage_error({"lunch"}).find("unknown subcommand 'lunch' (did you mean launch?)") == 0);
  CHECK(usage_error({}).find("no subcommand given") == 0);
  CHECK(usage_error({"config", "show", "--bogus"}).find("config show: ") == 0);
}

TEST_CASE("help and version are printed, not errors", "[cli]") {
  auto help = parse_cli({"launch", "--help"});
  REQUIRE(std::holds_alternative<PrintRequest>(help));
  CHECK(std::get<PrintRequest>(help).text.find("--nproc,--nproc-per-node,--nproc_per_node") != std::string::npos);
  auto version = parse_cli({"--version"});
  REQUIRE(std::holds_alternative<PrintRequest>(version));
  CHECK(std::get<PrintRequest>(version).text.rfind("mgtrain 0.", 0) == 0);
}

TEST_CASE("config show and validate take a path, --set and bare overrides", "[cli]") {
  auto show =
      std::get<ConfigShowRequest>(parse_cli({"config", "show", "c.yaml", "a.b=1", "--set", "c.d=2", "--show-origin"}));
  CHECK(show.config.path == std::optional<std::string>("c.yaml"));
  CHECK(show.config.overrides == std::vector<std::string>{"c.d=2", "a.b=1"});
  CHECK(show.show_origin);
  auto validate = std::get<ConfigValidateRequest>(parse_cli({"config", "validate", "c.yaml"}));
  CHECK(validate.config.path == std::optional<std::string>("c.yaml"));
  CHECK(usage_error({"config", "validate"}) == "config validate: give the config file to check");
}

TEST_CASE("config init answers come from flags", "[cli]") {
  auto init =
      std::get<ConfigInitRequest>(parse_cli({"config", "init", "out.yaml", "--nproc", "4", "--model", "mlp", "--yes"}));
  CHECK(init.path == "out.yaml");
  CHECK_FALSE(init.interactive_allowed);
  REQUIRE(init.answers.size() == 2);
  CHECK(init.answers[0].key == "launch.nproc");
  CHECK(init.answers[1].key == "model.type");
}

TEST_CASE("env and docs", "[cli]") {
  CHECK(std::get<EnvRequest>(parse_cli({"env", "--json"})).json);
  CHECK(std::holds_alternative<ConfigDocsRequest>(parse_cli({"config", "docs"})));
}
