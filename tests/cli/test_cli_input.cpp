// Flags with values (issue 22 item 5): a flag given --flag=VALUE takes only a boolean and never ends in "internal
// error"; --flag=false turns it off; value flags keep their text as written ([::1], junk numbers) for the config
// loader, which refuses junk with the flag's name.
#include <catch2/catch.hpp>

#include "cli/cli.hpp"
#include "cli_parsing.hpp"
#include "config/config_loader.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

namespace {

// The UsageError of loading the config a launch command line asks for.
std::string load_error(std::vector<std::string> args) {
  const LaunchRequest r = launch(std::move(args));
  LoadOptions options;
  options.make_run_id = [] { return std::string("run-x"); };
  try {
    load_config(r.config, {}, options);
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("expected a UsageError");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a flag given a value that is not a boolean is a usage error naming it", "[cli][input]") {
  CHECK(usage_error({"launch", "--standalone=x", "--nproc", "1", "--", "true"}) ==
        "launch: --standalone is a flag: give it alone, or as --standalone=true or --standalone=false (also yes/no, "
        "on/off, 1/0), not 'x'\nRun 'mgtrain launch --help' for usage.");
  CHECK(contains(usage_error({"launch", "--exit-with-stdin=abc", "--", "true"}),
                 "launch: --exit-with-stdin is a flag: give it alone, or as --exit-with-stdin=true"));
  // What CLI11 would count as flags ("5"), overflow (stoll) or take as a sign.
  for (const char* value : {"5", "-1", "99999999999999999999999", "", " ", "tru", "[true]"}) {
    INFO(value);
    CHECK(contains(usage_error({"launch", std::string("--standalone=") + value, "--", "true"}), "is a flag"));
  }
  CHECK(contains(usage_error({"launch", "--no-python=x", "--", "true"}), "--no-python is a flag"));
  CHECK(contains(usage_error({"launch", "--allow_uneven_nproc=2", "--", "true"}), "--allow_uneven_nproc is a flag"));
  CHECK(contains(usage_error({"config", "show", "--show-origin=x"}), "config show: --show-origin is a flag"));
  CHECK(contains(usage_error({"env", "--json=maybe"}), "env: --json is a flag"));
}

TEST_CASE("a flag given a boolean: true sets it, false turns it off", "[cli][input]") {
  CHECK(flag_value(launch({"--standalone=false", "--", "true"}), "launch.standalone") == "false");
  CHECK(flag_value(launch({"--standalone=YES", "--", "true"}), "launch.standalone") == "true");
  CHECK(flag_value(launch({"--standalone", "--", "true"}), "launch.standalone") == "true");
  CHECK(flag_value(launch({"--no-requeue=off", "--", "true"}), "launch.slurm_requeue") == "true");
  CHECK(flag_value(launch({"--no-requeue=1", "--", "true"}), "launch.slurm_requeue") == "false");
  CHECK(launch({"--no-python=false", "--", "true"}).command == std::vector<std::string>{"true"});
  // The program's own arguments are never looked at.
  CHECK(launch({"--", "prog", "--standalone=x"}).command == std::vector<std::string>{"prog", "--standalone=x"});
}

TEST_CASE("value flags keep their text, bracketed addresses are not YAML", "[cli][input]") {
  auto r = launch({"--master-addr", "[::1]", "--local-addr=[::1]", "--rdzv-endpoint", "[::1]:29400", "--rdzv-id",
                   "{a: 1}", "--", "true"});
  CHECK(flag_value(r, "launch.master_addr") == "[::1]");
  CHECK(flag_value(r, "launch.local_addr") == "[::1]");
  CHECK(flag_value(r, "launch.rdzv_endpoint") == "[::1]:29400");
  CHECK(flag_value(r, "launch.run_id") == "{a: 1}");
}

TEST_CASE("numeric flags given junk are refused by the loader naming the flag", "[cli][input]") {
  CHECK(contains(load_error({"--nproc", "abc", "--", "true"}), "--nproc abc: launch.nproc: 'abc' is not"));
  CHECK(contains(load_error({"--master-port=x", "--", "true"}), "launch.master_port: expected an integer, got 'x'"));
  CHECK(contains(load_error({"--master-port", "99999999999999999999", "--", "true"}), "launch.master_port"));
  CHECK(contains(load_error({"--max-restarts", "1e99", "--", "true"}), "launch.max_restarts"));
  CHECK(contains(load_error({"--grace-period", "nan", "--", "true"}), "launch.grace_period: expected a number"));
  CHECK(contains(load_error({"--node-rank", "", "--", "true"}), "launch.node_rank"));
  CHECK(contains(load_error({"--status-port", "[1]", "--", "true"}), "launch.status_port: expected an integer"));
  CHECK(contains(load_error({"--heartbeat-timeout", "{}", "--", "true"}), "launch.hang_timeout"));
}
