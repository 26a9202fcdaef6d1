// torchrun 2.15's launch options as flags and as PET_* variables: each is accepted with its meaning or refused
// with a reason (a table taken from torch/distributed/run.py, cross-checked against the venv's run.py when it is
// there), PET_ precedence and errors, --rdzv-conf, and a literal -- among the script's arguments.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "cli/cli.hpp"
#include "config/config_loader.hpp"
#include "process/run_capture.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

using namespace mgtrain;

namespace {

// One torchrun option: a sample value and what mgtrain must do with it.
struct Expected {
  std::string spellings;  // torchrun's, comma-separated
  bool flag = false;      // takes no value
  bool reads_pet = true;  // torchrun reads PET_<DEST>
  std::string sample;     // a value (flags: none)
  std::string key;        // the launch key it sets ("" none); "command" when it changes how the program runs;
                          // "prefix", "filters_out", "filters_err": the launcher variable it sets
  std::string value;      // the key's value ("" = sample)
  bool refused = false;
};

// From torch 2.15's run.py get_args_parser (dest -> option).
const std::map<std::string, Expected> kTorchrun = {
    {"nnodes", {"--nnodes", false, true, "2", "launch.nnodes", ""}},
    {"nproc_per_node", {"--nproc-per-node,--nproc_per_node", false, true, "4", "launch.nproc", ""}},
    {"rdzv_backend", {"--rdzv-backend,--rdzv_backend", false, true, "static", "launch.rdzv_backend", ""}},
    {"rdzv_endpoint", {"--rdzv-endpoint,--rdzv_endpoint", false, true, "localhost:0", "launch.rdzv_endpoint", ""}},
    {"rdzv_id", {"--rdzv-id,--rdzv_id", false, true, "job7", "launch.run_id", ""}},
    {"rdzv_conf", {"--rdzv-conf,--rdzv_conf", false, true, "join_timeout=60", "launch.join_timeout", "60"}},
    {"standalone", {"--standalone", true, true, "", "launch.standalone", "true"}},
    {"max_restarts", {"--max-restarts,--max_restarts", false, true, "3", "launch.max_restarts", ""}},
    {"monitor_interval", {"--monitor-interval,--monitor_interval", false, true, "0.5", "", ""}},
    {"start_method", {"--start-method,--start_method", false, true, "fork", "", ""}},
    {"event_log_handler", {"--event-log-handler,--event_log_handler", false, true, "console", "", ""}},
    {"role", {"--role", false, true, "trainer", "launch.role", ""}},
    {"module", {"-m,--module", true, true, "", "command", "-u -m train.py"}},
    {"no_python", {"--no-python,--no_python", true, true, "", "command", "train.py"}},
    {"run_path", {"--run-path,--run_path", true, true, "", "command", "-u train.py"}},
    {"log_dir", {"--log-dir,--log_dir", false, true, "L", "launch.log_dir", ""}},
    {"redirects", {"-r,--redirects", false, true, "3", "launch.redirect", ""}},
    {"tee", {"-t,--tee", false, true, "1", "launch.tee", ""}},
    {"log_line_prefix_template",
     {"--log-line-prefix-template,--log_line_prefix_template", false, true, "${rank}: ", "prefix", ""}},
    {"local_ranks_filter",
     {"--local-ranks-filter,--local_ranks_filter", false, true, "0", "launch.local_ranks_filter", ""}},
    {"duplicate_stdout_filters",
     {"--duplicate-stdout-filters,--duplicate_stdout_filters", false, true, "apple,,pear", "filters_out", ""}},
    {"duplicate_stderr_filters",
     {"--duplicate-stderr-filters,--duplicate_stderr_filters", false, true, "apple", "filters_err", ""}},
    {"node_rank", {"--node-rank,--node_rank", false, true, "1", "launch.node_rank", ""}},
    {"master_addr", {"--master-addr,--master_addr", false, true, "h", "launch.master_addr", ""}},
    {"master_port", {"--master-port,--master_port", false, true, "29501", "launch.master_port", ""}},
    {"local_addr", {"--local-addr,--local_addr", false, true, "10.0.0.2", "launch.local_addr", ""}},
    {"logs_specs", {"--logs-specs,--logs_specs", false, false, "default", "", ""}},  // torch's own; others refused
    {"numa_binding", {"--numa-binding,--numa_binding", false, false, "node", "", "", true}},
    {"signals_to_handle",
     {"--signals-to-handle,--signals_to_handle", false, true, "SIGTERM,SIGUSR1", "launch.signals_to_handle", ""}},
    {"shutdown_timeout", {"--shutdown-timeout,--shutdown_timeout", false, true, "30", "launch.grace_period", ""}},
    {"virtual_local_rank",
     {"--virtual-local-rank,--virtual_local_rank", true, true, "", "launch.virtual_local_rank", "true"}},
    {"print_completion", {"--print-completion,--print_completion", false, false, "bash", "", "", true}},
};

std::string pet_of(const std::string& dest) {
  std::string name = "PET_";
  for (char c : dest) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
  return text;
}

std::string setting(const std::vector<FlagSetting>& settings, const std::string& key) {
  std::string value = "<unset>";
  for (const auto& s : settings)
    if (s.key == key) value = s.value;
  return value;
}

// Whether `r` shows the effect `e` expects; `from_env` looks at the PET_ layer instead of the flags.
void check_effect(const LaunchRequest& r, const Expected& e, bool from_env) {
  const auto& settings = from_env ? r.config.environment : r.config.flags;
  const auto& other = from_env ? r.config.flags : r.config.environment;
  CHECK(other.empty());
  if (e.key == "command") {
    CHECK(joined(r.command) == e.value);
  } else if (e.key == "prefix") {
    CHECK(r.log_line_prefix_template == std::optional<std::string>(e.sample));
  } else if (e.key == "filters_out" || e.key == "filters_err") {
    CHECK(settings.empty());
    // The flag wins over PET_DUPLICATE_*_FILTERS (launch.cpp reads the variable itself when no flag is given).
    const auto& given = e.key == "filters_out" ? r.duplicate_stdout_filters : r.duplicate_stderr_filters;
    CHECK(given == (from_env ? std::nullopt : std::optional<std::string>(e.sample)));
  } else if (!e.key.empty()) {
    CHECK(setting(settings, e.key) == (e.value.empty() ? e.sample : e.value));
  } else {
    CHECK(settings.empty());  // accepted with no effect
    CHECK_FALSE(r.log_line_prefix_template);
    CHECK_FALSE(r.duplicate_stdout_filters);
    CHECK_FALSE(r.duplicate_stderr_filters);
  }
}

// A command line with `option` (and its sample) before the program; train.py is the program.
std::vector<std::string> command_line(const std::string& option, const Expected& e) {
  std::vector<std::string> args = {"launch", option};
  if (!e.flag) args.push_back(e.sample);
  args.push_back(e.key == "command" ? "train.py" : "prog");
  return args;
}

std::string usage_error(const std::vector<std::string>& args, const EnvMap& env = {}) {
  try {
    parse_cli(args, env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

// Every spelling as a flag, and PET_<DEST> alone, give the expected effect or a refusal with a reason.
void check_option(const std::string& dest, const Expected& e) {
  INFO("torchrun option " << dest);
  for (const auto& spelling : split(e.spellings, ',')) {
    INFO("spelling " << spelling);
    const auto args = command_line(spelling, e);
    if (e.refused) {
      const std::string error = usage_error(args);
      CHECK(error.rfind(spelling, 0) == 0);               // names what was given
      CHECK(error.find("mgtrain") != std::string::npos);  // says how mgtrain differs
    } else {
      check_effect(std::get<LaunchRequest>(parse_cli(args)), e, false);
    }
  }
  const std::string pet = pet_of(dest);
  INFO("variable " << pet);
  const EnvMap env = {{pet, e.flag ? "1" : e.sample}};
  const std::vector<std::string> plain = {"launch", e.key == "command" ? "train.py" : "prog"};
  if (!e.reads_pet) {  // torchrun does not read it: ignored
    CHECK(std::get<LaunchRequest>(parse_cli(plain, env)).config.environment.empty());
  } else if (e.refused) {
    CHECK(usage_error(plain, env).rfind("environment " + pet + "=", 0) == 0);
  } else {
    const LaunchRequest r = std::get<LaunchRequest>(parse_cli(plain, env));
    check_effect(r, e, true);
    for (const auto& s : r.config.environment) CHECK(s.origin_text().rfind("environment " + pet, 0) == 0);
  }
}

// torch/distributed/run.py of the torch 2.15 venv (scripts/torch2-env.sh), else Debian's python3-torch; "" if neither.
std::string find_run_py() {
  namespace fs = std::filesystem;
  std::vector<fs::path> venvs;
  if (const char* venv = std::getenv("MGTRAIN_TORCH2_VENV")) venvs.emplace_back(venv);
  venvs.emplace_back(MGTRAIN_TORCH2_VENV);  // tests/CMakeLists.txt: scripts/torch2-env.sh's venv
  std::error_code ec;
  for (const auto& venv : venvs) {
    for (const auto& entry : fs::directory_iterator(venv / "lib", ec)) {
      fs::path run = entry.path() / "site-packages/torch/distributed/run.py";
      if (fs::exists(run, ec)) return run.string();
    }
  }
  const fs::path debian = "/usr/lib/python3/dist-packages/torch/distributed/run.py";
  return fs::exists(debian, ec) ? debian.string() : "";
}

}  // namespace

TEST_CASE("torchrun 2.15: every option, both spellings and its PET_ variable, is accepted with its meaning or refused",
          "[cli][torchrun]") {
  for (const auto& [dest, expected] : kTorchrun) check_option(dest, expected);
}

TEST_CASE("torchrun's run.py: every option its parser has is in the table and handled as the table says",
          "[cli][torchrun]") {
  const std::string run_py = find_run_py();
  if (run_py.empty()) {
    WARN("skipped: no torch run.py (scripts/torch2-env.sh makes the torch 2.15 venv; or apt install python3-torch)");
    return;
  }
  CapturedRun listing =
      run_and_capture({"python3", std::string(MGTRAIN_SOURCE_DIR) + "/tests/cli/list_torchrun_options.py", run_py});
  INFO(run_py << "\n" << listing.err);
  REQUIRE(listing.exit_code == 0);
  std::istringstream lines(listing.out);
  int options = 0;
  // The torchrun personality's --help (one line per entry at this width) lists every spelling run.py has.
  const CliRequest help_request = parse_cli({"torchrun", "--help"}, {{"COLUMNS", "1000"}});
  REQUIRE(std::holds_alternative<PrintRequest>(help_request));
  const std::string help = std::get<PrintRequest>(help_request).text;
  for (std::string line; std::getline(lines, line);) {
    const auto fields = split(line, '\t');
    REQUIRE(fields.size() == 4);
    const std::string& dest = fields[0];
    if (dest == "help") continue;
    INFO("run.py option " << dest << " (" << fields[3] << ")");
    auto found = kTorchrun.find(dest);
    if (found == kTorchrun.end()) {
      FAIL(
          "a torchrun option the table does not know: decide what mgtrain does with it (torchrun_options.cpp, "
          "docs/torchrun.md)");
      continue;
    }
    Expected e = found->second;
    CHECK((fields[1] == "flag") == e.flag);
    CHECK((fields[2] == "pet") == e.reads_pet);
    e.spellings = fields[3];  // the spellings this torch version has
    for (const auto& spelling : split(fields[3], ',')) {
      const bool listed = help.find("\n  " + spelling + (e.flag ? "" : " ")) != std::string::npos ||
                          help.find(", " + spelling + (e.flag ? "" : " ")) != std::string::npos;
      INFO("in the personality's --help: " << spelling);
      CHECK(listed);
    }
    check_option(dest, e);
    ++options;
  }
  CHECK(options >= 20);
}

TEST_CASE("accepted values of options that torchrun and mgtrain treat differently", "[cli][torchrun]") {
  CHECK(std::get<LaunchRequest>(parse_cli({"launch", "--duplicate-stdout-filters", "", "prog"}))
            .duplicate_stdout_filters ==
        std::optional<std::string>(""));  // torchrun: one empty filter, which every line matches
  CHECK(
      setting(
          std::get<LaunchRequest>(parse_cli({"launch", "prog"}, {{"PET_VIRTUAL_LOCAL_RANK", "0"}})).config.environment,
          "launch.virtual_local_rank") == "false");
  // --signals-to-handle's names are the schema's check (launch.signals_to_handle): tests/config/test_torchrun_defaults.
  CHECK(usage_error({"launch", "--rdzv-backend", "etcd-v2", "prog"}).find("use --rdzv-backend c10d --rdzv-endpoint") !=
        std::string::npos);
  CHECK(usage_error({"launch", "--nproc-per-node", "xpu", "prog"})
            .rfind("--nproc-per-node xpu: mgtrain runs workers on NVIDIA GPUs or CPUs", 0) == 0);
  CHECK(usage_error({"launch", "--start-method", "thread", "prog"}) ==
        "--start-method thread: 'thread' is not a start method: use spawn, fork or forkserver");
  CHECK(usage_error({"launch", "--monitor_interval", "soon", "prog"}) ==
        "--monitor_interval soon: 'soon' is not a number of seconds");
  CHECK(usage_error({"launch", "--numa-binding", "node", "prog"}).find("numactl --cpunodebind=${local_rank}") !=
        std::string::npos);
  CHECK(usage_error({"launch", "--logs-specs", "x", "prog"}).find("--log-dir, --tee, --redirects") !=
        std::string::npos);
  CHECK(
      usage_error({"launch", "--logs_specs", "Default", "prog"}).rfind("--logs_specs Default: LogsSpecs plugins", 0) ==
      0);  // torch's entry point names are matched exactly
}

TEST_CASE("rdzv-conf maps torchrun's rendezvous options onto launch keys and refuses unknown ones", "[cli][torchrun]") {
  auto r = std::get<LaunchRequest>(parse_cli({"launch", "--rdzv-conf",
                                              "join_timeout=60,last_call_timeout=5,keep_alive_interval=2,keep_alive_"
                                              "max_attempt=4,close_timeout=3,read_timeout=9,"
                                              "is_host=true,use_libuv=0,store_type=tcp",
                                              "prog"}));
  CHECK(setting(r.config.flags, "launch.join_timeout") == "60");
  CHECK(setting(r.config.flags, "launch.last_call_timeout") == "5");
  CHECK(setting(r.config.flags, "launch.node_heartbeat_interval") == "2");
  CHECK(setting(r.config.flags, "launch.node_timeout") == "8");  // 4 attempts x 2 s
  CHECK(r.config.flags.size() == 4);
  auto timeout =
      std::get<LaunchRequest>(parse_cli({"launch", "--rdzv_conf", "timeout=100,keep_alive_max_attempt=3", "prog"}));
  CHECK(setting(timeout.config.flags, "launch.join_timeout") == "100");
  CHECK(setting(timeout.config.flags, "launch.node_timeout") == "15");  // torchrun's 5 s interval
  // An explicit flag wins over the same key in --rdzv-conf.
  auto both =
      std::get<LaunchRequest>(parse_cli({"launch", "--join-timeout", "7", "--rdzv-conf", "join_timeout=60", "prog"}));
  CHECK(setting(both.config.flags, "launch.join_timeout") == "7");
  CHECK(usage_error({"launch", "--rdzv-conf", "foo=1,join_timeout=2,bar=3", "prog"})
            .rfind("--rdzv-conf foo=1,join_timeout=2,bar=3: unknown rendezvous options bar, foo: mgtrain understands",
                   0) == 0);
  CHECK(usage_error({"launch", "--rdzv-conf", "join_timeout", "prog"})
            .find("rendezvous option 'join_timeout' has no value") != std::string::npos);
  CHECK(usage_error({"launch", "--rdzv-conf", "store_type=file", "prog"}).find("TCP only") != std::string::npos);
  CHECK(usage_error({"launch", "prog"}, {{"PET_RDZV_CONF", "rank=1"}})
            .rfind("environment PET_RDZV_CONF=rank=1: rank: give the node's rank with --node-rank", 0) == 0);
  // Stray quotes, as torchrun reads them: a quoted key is one nobody knows (ignored), a quoted number is refused.
  auto quoted_key =
      std::get<LaunchRequest>(parse_cli({"launch", "--rdzv-conf", "timeout=30,\"join_timeout=60\",'x'=1", "prog"}));
  CHECK(setting(quoted_key.config.flags, "launch.join_timeout") == "30");
  CHECK(quoted_key.config.flags.size() == 1);
  CHECK(usage_error({"launch", "--rdzv-conf", "join_timeout=\"60\"", "prog"}) ==
        "--rdzv-conf join_timeout=\"60\": rendezvous option 'join_timeout': \"60\" is not an integer (torchrun refuses "
        "it too): write join_timeout=60 without quotes");
  CHECK(usage_error({"launch", "prog"}, {{"PET_RDZV_CONF", "keep_alive_interval='2'"}})
            .rfind("environment PET_RDZV_CONF=keep_alive_interval='2': rendezvous option 'keep_alive_interval'", 0) ==
        0);
  // A quoted timeout: torchrun's c10d rendezvous (one node) does not read timeout and runs; so does mgtrain, saying so.
  auto quoted_timeout =
      std::get<LaunchRequest>(parse_cli({"launch", "--rdzv-conf='join_timeout=5,timeout=5'", "prog"}));
  CHECK(quoted_timeout.config.flags.empty());
  REQUIRE(quoted_timeout.notices.size() == 1);
  CHECK_THAT(quoted_timeout.notices[0], Catch::Contains("timeout=5' has quotes, so it is ignored"));
  CHECK(std::get<LaunchRequest>(parse_cli({"torchrun", "--rdzv-conf='timeout=5'", "prog"})).notices.empty());
  CHECK(usage_error({"launch", "--rdzv-conf", "store_type=\"tcp\"", "prog"}).find("TCP only") != std::string::npos);
  CHECK(usage_error({"launch", "--rdzv-conf", "timeout=30,", "prog"}).find("KEY=VALUE,KEY=VALUE") != std::string::npos);
  // A bad number is caught where the key is loaded, naming the rendezvous option.
  auto bad = std::get<LaunchRequest>(parse_cli({"launch", "--rdzv-conf", "join_timeout=soon", "prog"}));
  CHECK_THROWS_WITH(load_config(bad.config, {}),
                    Catch::StartsWith("--rdzv-conf join_timeout=soon: launch.join_timeout:"));
}

TEST_CASE("PET_ precedence: flag > PET_ > MGTRAIN_* and YAML > default, and origins name the variable",
          "[cli][torchrun][config]") {
  const EnvMap env = {{"PET_NNODES", "2"},
                      {"PET_MAX_RESTARTS", "4"},
                      {"MGTRAIN_LAUNCH_NNODES", "5"},
                      {"MGTRAIN_LAUNCH_MAX_RESTARTS", "6"},
                      {"MGTRAIN_LAUNCH_TEE", "2"},
                      {"PET_STANDALONE", "1"},
                      {"PET_NOT_AN_OPTION", "x"}};
  auto r = std::get<LaunchRequest>(parse_cli({"launch", "--max-restarts", "9", "launch.nnodes=3", "prog"}, env));
  LoadedConfig loaded = load_config_text("launch:\n  nnodes: 7\n  nproc: 3\n", "job.yaml", r.config, env);
  CHECK(loaded.config.launch.nnodes == NodeRange::exactly(2));  // PET_ over --set/bare override, MGTRAIN_* and YAML
  CHECK(loaded.origin_of("launch.nnodes") == "environment PET_NNODES");
  CHECK(loaded.config.launch.max_restarts == 9);  // the flag wins
  CHECK(loaded.origin_of("launch.max_restarts") == "--max-restarts 9");
  CHECK(loaded.config.launch.standalone);
  CHECK(loaded.origin_of("launch.standalone") == "environment PET_STANDALONE");
  CHECK(loaded.config.launch.tee.text() == "2");  // MGTRAIN_* where no PET_ is set
  CHECK(loaded.config.launch.nproc == NprocSpec::workers(3));
  // config show sees the same.
  auto show = std::get<ConfigShowRequest>(parse_cli({"config", "show"}, env));
  CHECK(load_config(show.config, env).origin_of("launch.nnodes") == "environment PET_NNODES");
}

TEST_CASE("TORCH_ELASTIC_SHUTDOWN_TIMEOUT sets the grace period below --shutdown-timeout and PET_SHUTDOWN_TIMEOUT",
          "[cli][torchrun][config]") {
  auto grace = [](const std::vector<std::string>& args, const EnvMap& env) {
    auto r = std::get<LaunchRequest>(parse_cli(args, env));
    LoadedConfig loaded = load_config_text("launch:\n  grace_period: 7\n", "job.yaml", r.config, env);
    return std::make_pair(loaded.config.launch.grace_period, loaded.origin_of("launch.grace_period"));
  };
  const EnvMap env = {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "2"}};
  CHECK(grace({"launch", "prog"}, env) ==
        std::make_pair(2.0, std::string("environment TORCH_ELASTIC_SHUTDOWN_TIMEOUT")));
  CHECK(grace({"launch", "prog"}, {}).first == 7.0);
  CHECK(grace({"launch", "--shutdown-timeout", "4", "prog"}, env).first == 4.0);
  CHECK(grace({"launch", "--grace-period", "5", "prog"}, env).first == 5.0);
  EnvMap both = env;
  both["PET_SHUTDOWN_TIMEOUT"] = "3";
  CHECK(grace({"launch", "prog"}, both).first == 3.0);
  CHECK_THROWS_WITH(grace({"launch", "prog"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}),
                    Catch::Contains("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"));
}

TEST_CASE("bad PET_ values name the variable", "[cli][torchrun][errors]") {
  auto r = std::get<LaunchRequest>(parse_cli({"launch", "prog"}, {{"PET_NNODES", "abc"}}));
  CHECK_THROWS_WITH(load_config(r.config, {}), Catch::StartsWith("environment PET_NNODES=abc: launch.nnodes: "));
  CHECK(usage_error({"launch", "prog"}, {{"PET_STANDALONE", "yes"}}) ==
        "environment PET_STANDALONE=yes: torchrun reads PET_STANDALONE as an integer: 1 (on) or 0 (off)");
  CHECK(usage_error({"launch", "prog"}, {{"PET_RDZV_BACKEND", "etcd"}})
            .rfind("environment PET_RDZV_BACKEND=etcd: mgtrain has its own rendezvous", 0) == 0);
  CHECK(usage_error({"launch", "c.yaml"}, {{"PET_MODULE", "1"}}).find("apply to a program, and none was given") !=
        std::string::npos);
  // A flag given on the command line means the variable is not read at all.
  CHECK(std::get<LaunchRequest>(parse_cli({"launch", "--nnodes", "1", "prog"}, {{"PET_NNODES", "abc"}}))
            .config.environment.empty());
}

TEST_CASE("mgtrain env: what each PET_ variable does", "[cli][torchrun]") {
  auto found = describe_torchrun_variables({{"PET_NNODES", "2"},
                                            {"PET_FOO", "1"},
                                            {"PET_RDZV_BACKEND", "etcd"},
                                            {"PET_MONITOR_INTERVAL", "1"},
                                            {"PET_MODULE", "1"},
                                            {"PET_DUPLICATE_STDERR_FILTERS", "oom"},
                                            {"PATH", "/bin"}});
  REQUIRE(found.size() == 6);
  std::map<std::string, std::string> effect;
  for (const auto& v : found) effect[v.name] = v.effect;
  CHECK(effect["PET_NNODES"] == "launch.nnodes = 2");
  CHECK(effect["PET_FOO"].rfind("ignored", 0) == 0);
  CHECK(effect["PET_RDZV_BACKEND"].rfind("refused: environment PET_RDZV_BACKEND=etcd: mgtrain", 0) == 0);
  CHECK(effect["PET_MONITOR_INTERVAL"].find("no effect") != std::string::npos);
  CHECK(effect["PET_MODULE"] == "the program is a Python module (-m)");
  CHECK_THAT(effect["PET_DUPLICATE_STDERR_FILTERS"], Catch::Contains("attempt_N/filtered_stderr.log"));
}

TEST_CASE("a literal -- among the script's arguments belongs to the script", "[cli][torchrun]") {
  auto script = std::get<LaunchRequest>(parse_cli({"launch", "--nproc", "2", "train.py", "a", "--", "b"}));
  CHECK(joined(script.command) == "-u train.py a -- b");
  auto program = std::get<LaunchRequest>(parse_cli({"launch", "x.y=1", "./prog", "--", "--nproc", "3"}));
  CHECK(joined(program.command) == "./prog -- --nproc 3");
  CHECK(program.config.flags.empty());
  auto after = std::get<LaunchRequest>(parse_cli({"launch", "--nproc", "2", "--", "prog", "--", "x"}));
  CHECK(joined(after.command) == "prog -- x");
  auto module = std::get<LaunchRequest>(parse_cli({"launch", "-m", "--", "pkg.train", "--lr", "1"}));
  CHECK(module.run_under_python);
  CHECK(joined(module.command) == "-u -m pkg.train --lr 1");
}

namespace {

// The error parse_cli throws for `args`, and whether it is a CommandLineError (exit 2 in the torchrun personality).
std::pair<std::string, bool> refusal(const std::vector<std::string>& args, const EnvMap& env = {}) {
  try {
    parse_cli(args, env);
  } catch (const CommandLineError& e) {
    return {e.what(), true};
  } catch (const UsageError& e) {
    return {e.what(), false};
  }
  return {"<no error>", false};
}

}  // namespace

TEST_CASE("torchrun personality: what torchrun's argparse refuses is a CommandLineError, later refusals are not",
          "[cli][torchrun]") {
  // argparse: type=int / type=float / choices, a flag with a value, no script, an unknown flag.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"torchrun", "--max-restarts", "x", "p.py"},
                                             {"torchrun", "--monitor-interval", "soon", "p.py"},
                                             {"torchrun", "--shutdown-timeout", "1.5", "p.py"},
                                             {"torchrun", "--start-method", "thread", "p.py"},
                                             {"torchrun", "--numa-binding", "bad", "p.py"},
                                             {"torchrun", "--standalone=1", "p.py"},
                                             {"torchrun", "--nproc-per-node", "1"},
                                             {"torchrun", "--nproc-per-node", "1", "--"},
                                             {"torchrun", "--nprocs", "1", "p.py"}}) {
    INFO(joined(args));
    const auto [message, command_line] = refusal(args);
    CHECK(command_line);
  }
  CHECK(refusal({"torchrun", "p.py"}, {{"PET_NODE_RANK", "one"}}).second);  // argparse converts a PET_ default too
  CHECK(refusal({"torchrun", "--shutdown-timeout", "1.5", "p.py"}).first ==
        "--shutdown-timeout 1.5: '1.5' is not an integer (torchrun's parser reads it with int())");
  // Parsed by torchrun, refused later (exit 1): -m with --no-python, a LogsSpecs plugin, a quoted integer in
  // --rdzv-conf, a start method from PET_ (argparse holds only flags to choices), NUMA binding, etcd.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"torchrun", "--no-python", "-m", "mod"},
                                             {"torchrun", "--logs-specs=nope", "p.py"},
                                             {"torchrun", "--rdzv-conf", "join_timeout='5'", "p.py"},
                                             {"torchrun", "--numa-binding", "node", "p.py"},
                                             {"torchrun", "--rdzv-backend", "etcd", "p.py"}}) {
    INFO(joined(args));
    const auto [message, command_line] = refusal(args);
    CHECK(message != "<no error>");
    CHECK_FALSE(command_line);
  }
  CHECK_FALSE(refusal({"torchrun", "p.py"}, {{"PET_START_METHOD", "thread"}}).second);
  CHECK_FALSE(refusal({"torchrun", "p.py"}, {{"PET_STANDALONE", "yes"}}).second);  // bool(int()) in its constructor
  // mgtrain launch takes what its own keys take: --shutdown-timeout 1.5, --standalone=true.
  CHECK(refusal({"launch", "--shutdown-timeout", "1.5", "--standalone=true", "p.py"}).first == "<no error>");
}

TEST_CASE("torchrun personality: numbers as Python's int() and float() read them are handed on as plain numbers",
          "[cli][torchrun]") {
  auto flags = [](const std::vector<std::string>& args, const EnvMap& env = {}) {
    const auto r = std::get<LaunchRequest>(parse_cli(args, env));
    return std::make_pair(r.config.flags, r.config.environment);
  };
  CHECK(setting(flags({"torchrun", "--max-restarts", " 1_0 ", "p.py"}).first, "launch.max_restarts") == "10");
  CHECK(setting(flags({"torchrun", "--node-rank=+1", "p.py"}).first, "launch.node_rank") == "1");
  CHECK(setting(flags({"torchrun", "p.py"}, {{"PET_SHUTDOWN_TIMEOUT", "\t3\n"}}).second, "launch.grace_period") == "3");
  CHECK(refusal({"torchrun", "--monitor-interval", "1e-1", "p.py"}).first == "<no error>");
  CHECK(refusal({"torchrun", "--monitor-interval", "-INF", "p.py"}).first != "<no error>");  // accepted by float(),
  CHECK_FALSE(refusal({"torchrun", "--monitor-interval", "-INF", "p.py"}).second);  // then refused by mgtrain: 1
  for (const char* bad : {"1__0", "_1", "1_", "0x10", "1.0", "", " "}) {
    INFO(bad);
    CHECK(refusal({"torchrun", "--max-restarts", bad, "p.py"}).second);
  }
  for (const char* bad : {"1e", ".", "e1", "1..0", "inf1"}) {
    INFO(bad);
    CHECK(refusal({"torchrun", "--monitor-interval", bad, "p.py"}).second);
  }
}

TEST_CASE("a flag given twice: the last value wins in both personalities, and mgtrain launch says so", "[cli]") {
  auto twice = std::get<LaunchRequest>(parse_cli({"launch", "--nproc", "1", "--nproc_per_node=2", "prog"}));
  CHECK(setting(twice.config.flags, "launch.nproc") == "2");
  REQUIRE(twice.notices.size() == 1);
  CHECK(twice.notices[0] ==
        "--nproc_per_node given twice (--nproc 1, then --nproc_per_node 2): the last, "
        "--nproc_per_node 2, is used");
  // Two flags of one key: the one given last wins, whatever their order in mgtrain's table.
  auto keys = std::get<LaunchRequest>(
      parse_cli({"launch", "--shutdown-timeout", "10", "--grace-period", "5", "--rdzv-conf", "a'=1", "prog"}));
  CHECK(setting(keys.config.flags, "launch.grace_period") == "5");
  REQUIRE(keys.notices.size() == 1);
  CHECK_THAT(keys.notices[0], Catch::StartsWith("launch.grace_period given twice (--shutdown-timeout 10, then "));
  auto three = std::get<LaunchRequest>(parse_cli(
      {"launch", "--rdzv-conf", "join_timeout=1", "--rdzv_conf", "join_timeout=2", "--rdzv-conf=join_timeout=3", "p"}));
  CHECK(setting(three.config.flags, "launch.join_timeout") == "3");
  CHECK_THAT(three.notices.at(0), Catch::StartsWith("--rdzv-conf given 3 times (--rdzv-conf join_timeout=1, "
                                                    "--rdzv_conf join_timeout=2, then --rdzv-conf join_timeout=3)"));
  // The same value twice says nothing; a secret given twice is not shown.
  CHECK(std::get<LaunchRequest>(parse_cli({"launch", "--nproc", "2", "--nproc", "2", "p"})).notices.empty());
  auto secret =
      std::get<LaunchRequest>(parse_cli({"launch", "--rdzv-token", "s3cret-1", "--rdzv-token", "s3cret-2", "p"}));
  CHECK(secret.rdzv_token == std::optional<std::string>("s3cret-2"));
  REQUIRE(secret.notices.size() == 1);
  CHECK(secret.notices[0].find("s3cret") == std::string::npos);
  // The personality: torchrun's argparse keeps the last one and says nothing.
  auto personality =
      std::get<LaunchRequest>(parse_cli({"torchrun", "--nproc_per_node", "1", "--nproc_per_node", "2", "p"}));
  CHECK(setting(personality.config.flags, "launch.nproc") == "2");
  CHECK(personality.notices.empty());
}
