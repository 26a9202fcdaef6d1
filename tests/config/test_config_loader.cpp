// Config loading: precedence of the five sources, and every error path with its location and key.
#include <catch2/catch.hpp>

#include "config/config_loader.hpp"
#include "config/config_schema.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

LoadOptions fixed_run_id() {
  LoadOptions options;
  options.make_run_id = [] { return std::string("run-x"); };
  return options;
}

LoadedConfig load(const std::string& yaml, ConfigRequest request = {}, EnvMap env = {}) {
  return load_config_text(yaml, "configs/x.yaml", request, env, fixed_run_id());
}

// The UsageError message `yaml` (plus request/env) produces; fails the test when it loads fine.
std::string error_of(const std::string& yaml, ConfigRequest request = {}, EnvMap env = {}) {
  try {
    load(yaml, request, env);
  } catch (const UsageError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL("expected a UsageError");
  return "";
}

}  // namespace

TEST_CASE("defaults apply when nothing is given", "[config]") {
  LoadedConfig c = load("");
  CHECK(c.config.train.batch_size == 64);
  CHECK(c.config.launch.nproc == NprocSpec::workers(1));
  CHECK(c.config.model.hidden_sizes == std::vector<std::int64_t>{256, 128, 100});
  CHECK(c.origin.at("train.batch_size") == "default");
  CHECK(c.config.launch.run_id == "run-x");
  CHECK(c.origin.at("launch.run_id") == "generated");
}

TEST_CASE("each source overrides the one below it", "[config]") {
  const std::string yaml = "train:\n  batch_size: 8\n  epochs: 3\n  seed: 5\n  max_steps: 9\n";
  ConfigRequest request;
  request.overrides = {"train.epochs=4", "train.seed=6"};
  request.flags = {{"train.seed", "7", "--seed"}};
  EnvMap env = {{"MGTRAIN_TRAIN_EPOCHS", "10"}, {"MGTRAIN_TRAIN_MAX_STEPS", "11"}, {"MGTRAIN_TRAIN_BATCH_SIZE", "12"}};
  LoadedConfig c = load(yaml, request, env);
  CHECK(c.config.train.batch_size == 12);  // env > file
  CHECK(c.config.train.max_steps == 11);   // env > file
  CHECK(c.config.train.epochs == 4);       // override > env
  CHECK(c.config.train.seed == 7);         // flag > override
  CHECK(c.origin.at("train.batch_size") == "environment MGTRAIN_TRAIN_BATCH_SIZE");
  CHECK(c.origin.at("train.epochs") == "override train.epochs=4");
  CHECK(c.origin.at("train.seed") == "--seed 7");
  CHECK(c.origin.at("train.grad_accum_steps") == "default");
}

TEST_CASE("file values carry their line and column as origin", "[config]") {
  LoadedConfig c = load("optim:\n  lr: 0.5\n");
  CHECK(c.config.optim.lr == Approx(0.5));
  CHECK(c.origin.at("optim.lr") == "configs/x.yaml:2:7");
}

TEST_CASE("lists come from YAML sequences, comma lists and flow lists", "[config]") {
  CHECK(load("model:\n  hidden_sizes: [64, 32]\n").config.model.hidden_sizes == std::vector<std::int64_t>{64, 32});
  CHECK(load("model:\n  hidden_sizes:\n    - 5\n    - 6\n").config.model.hidden_sizes ==
        std::vector<std::int64_t>{5, 6});
  ConfigRequest r;
  r.overrides = {"model.hidden_sizes=1,2,3"};
  CHECK(load("", r).config.model.hidden_sizes == std::vector<std::int64_t>{1, 2, 3});
  r.overrides = {"model.hidden_sizes=[7, 8]"};
  CHECK(load("", r).config.model.hidden_sizes == std::vector<std::int64_t>{7, 8});
  r.overrides = {"model.hidden_sizes="};
  CHECK(load("", r).config.model.hidden_sizes.empty());
}

TEST_CASE("strings from overrides are taken verbatim", "[config]") {
  ConfigRequest r;
  r.overrides = {"launch.python=host: with colon"};
  CHECK(load("", r).config.launch.python == "host: with colon");
}

TEST_CASE("booleans accept the usual spellings", "[config]") {
  CHECK(load("data:\n  shuffle: no\n").config.data.shuffle == false);
  CHECK(load("data:\n  shuffle: On\n").config.data.shuffle == true);
  EnvMap env = {{"MGTRAIN_DATA_SHUFFLE", "0"}};
  CHECK(load("", {}, env).config.data.shuffle == false);
}

TEST_CASE("unknown keys are errors with file, line, column and a suggestion", "[config][errors]") {
  CHECK(error_of("train:\n  epochs: 2\n  batch_sise: 32\n") ==
        "configs/x.yaml:3:3: train.batch_sise: unknown key (did you mean train.batch_size?)");
  CHECK(error_of("trian:\n  epochs: 3\n") == "configs/x.yaml:1:1: trian: unknown key (did you mean train?)");
  CHECK(error_of("train:\n  zzzzzzzz: 1\n") == "configs/x.yaml:2:3: train.zzzzzzzz: unknown key");
}

TEST_CASE("wrong types are errors naming the value", "[config][errors]") {
  CHECK(error_of("train:\n  batch_size: abc\n") ==
        "configs/x.yaml:2:15: train.batch_size: expected an integer, got 'abc'");
  CHECK(error_of("train:\n  batch_size: 1.5\n") ==
        "configs/x.yaml:2:15: train.batch_size: expected an integer, got '1.5'");
  CHECK(error_of("optim:\n  lr: fast\n") == "configs/x.yaml:2:7: optim.lr: expected a number, got 'fast'");
  CHECK(error_of("data:\n  shuffle: maybe\n") ==
        "configs/x.yaml:2:12: data.shuffle: expected true or false, got 'maybe'");
  CHECK(error_of("train:\n  batch_size: [1, 2]\n") ==
        "configs/x.yaml:2:15: train.batch_size: expected an integer, got a list");
  CHECK(error_of("model:\n  hidden_sizes: [1, x]\n") ==
        "configs/x.yaml:2:17: model.hidden_sizes: expected a list of integers, got element 'x'");
  CHECK(error_of("launch:\n  master_addr: {a: 1}\n") ==
        "configs/x.yaml:2:16: launch.master_addr: expected a string, got a mapping");
}

TEST_CASE("out-of-range values and bad choices are errors", "[config][errors]") {
  CHECK(error_of("train:\n  batch_size: 0\n") ==
        "configs/x.yaml:2:15: train.batch_size: 0 is out of range (allowed: 1 to 16777216)");
  CHECK(error_of("launch:\n  master_port: 70000\n") ==
        "configs/x.yaml:2:16: launch.master_port: 70000 is out of range (allowed: 0 to 65535)");
  CHECK(error_of("model:\n  hidden_sizes: [8, 0]\n") ==
        "configs/x.yaml:2:17: model.hidden_sizes: 0 is out of range (allowed: each element >= 1)");
  CHECK(error_of("optim:\n  name: adm\n") ==
        "configs/x.yaml:2:9: optim.name: 'adm' is not allowed (allowed: one of sgd, adam, adamw) (did you mean adam?)");
  CHECK(error_of("launch:\n  nproc: many\n") ==
        "configs/x.yaml:2:10: launch.nproc: 'many' is not a process count (allowed: N >= 1, auto, gpu or cpu)");
  CHECK(error_of("launch:\n  nnodes: 3:2\n") ==
        "configs/x.yaml:2:11: launch.nnodes: '3:2' is not a node count (allowed: N >= 1, or MIN:MAX with 1 <= MIN <= "
        "MAX)");
  CHECK(error_of("launch:\n  tee: 4\n").find("launch.tee: '4' is not a stream mapping") != std::string::npos);
  CHECK(error_of("launch:\n  gpu_ids: 0,x\n")
            .find("launch.gpu_ids: 'x' in '0,x' is not a GPU index or a GPU-/MIG- UUID") != std::string::npos);
}

TEST_CASE("valid special values pass the custom checks", "[config]") {
  ConfigRequest r;
  r.overrides = {"launch.nproc=gpu", "launch.nnodes=1:4", "launch.tee=0:3,1:1", "launch.gpu_ids=0,2",
                 "checkpoint.resume=/x/ck.pt"};
  LoadedConfig c = load("", r);
  CHECK(c.config.launch.nnodes == (NodeRange{1, 4}));
  CHECK(c.config.checkpoint.resume == "/x/ck.pt");
}

TEST_CASE("malformed YAML, duplicates, null values and wrong shapes are errors", "[config][errors]") {
  CHECK(error_of("train:\n  batch_size: [1\n").rfind("configs/x.yaml:3:1: malformed YAML: ", 0) == 0);
  CHECK(error_of("train:\n  epochs: 1\n  epochs: 2\n") ==
        "configs/x.yaml:3:3: train.epochs: duplicate key (it is already set above in the same mapping)");
  CHECK(error_of("train:\n  epochs:\n") ==
        "configs/x.yaml:2:3: train.epochs: has no value (give a value, or delete the line to use the default)");
  CHECK(error_of("train: 5\n") ==
        "configs/x.yaml:1:1: train: is a section; expected keys below it (e.g. train.<key>: value)");
  CHECK(error_of("- 1\n- 2\n") ==
        "configs/x.yaml:1:1: the config must be a mapping of sections (launch:, train:, ...), not a list");
  CHECK(load("train:\n").config.train.epochs == 1);  // an empty section is fine
  CHECK(load("# only a comment\n").config.train.epochs == 1);
}

TEST_CASE("a missing file is an error naming the path", "[config][errors]") {
  ConfigRequest r;
  r.path = "no/such/config.yaml";
  try {
    load_config(r, {}, fixed_run_id());
    FAIL("expected an error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) == "no/such/config.yaml: cannot read the config file: No such file or directory");
  }
}

TEST_CASE("environment and override errors name their source", "[config][errors]") {
  CHECK(error_of("", {}, {{"MGTRAIN_TRAIN_BATCH_SISE", "3"}}) ==
        "environment MGTRAIN_TRAIN_BATCH_SISE: not a config key (did you mean MGTRAIN_TRAIN_BATCH_SIZE?) "
        "(mgtrain reads MGTRAIN_<SECTION>_<KEY>; unset it or fix the name)");
  CHECK(error_of("", {}, {{"MGTRAIN_TRAIN_BATCH_SIZE", "x"}}) ==
        "environment MGTRAIN_TRAIN_BATCH_SIZE: train.batch_size: expected an integer, got 'x'");
  ConfigRequest r;
  r.overrides = {"train.batch_sise=3"};
  CHECK(error_of("", r) ==
        "override train.batch_sise=3: train.batch_sise: unknown key (did you mean train.batch_size?)");
  r.overrides = {"train.batch_size"};
  CHECK(error_of("", r) == "override 'train.batch_size': expected KEY=VALUE, e.g. train.batch_size=32");
  ConfigRequest f;
  f.flags = {{"launch.master_port", "http", "--master-port"}};
  CHECK(error_of("", f) == "--master-port http: launch.master_port: expected an integer, got 'http'");
}

TEST_CASE("MGTRAIN_ variables outside the config sections are not config", "[config]") {
  EnvMap env = {{"MGTRAIN_CONFIG_FILE", "x"}, {"MGTRAIN_HEARTBEAT_FILE", "y"}, {"MGTRAIN_RUN_DIR", "z"}};
  CHECK(load("", {}, env).config.train.epochs == 1);
}

TEST_CASE("every key has a distinct environment name", "[config]") {
  std::set<std::string> names;
  for (const auto& k : config_schema()) CHECK(names.insert(env_name_for_key(k.path)).second);
}

TEST_CASE("path variables expand in string values", "[config][variables]") {
  ConfigRequest r;
  r.overrides = {"launch.run_id=r1", "data.path=${config_dir}/data/${env:MG_TEST_VAR}",
                 "launch.log_dir=/logs/${run_id}"};
  LoadedConfig c = load("", r, {{"MG_TEST_VAR", "fmnist"}});
  CHECK(c.config.data.path == c.config_dir + "/data/fmnist");
  CHECK(c.config.launch.log_dir == "/logs/r1");
  CHECK(c.config.checkpoint.dir == "/logs/r1/r1/checkpoints");  // default uses ${log_dir}/${run_id}
  CHECK(c.config_dir.find("configs") != std::string::npos);
}

TEST_CASE("a generated run id is used by ${run_id}", "[config][variables]") {
  LoadedConfig c = load("checkpoint:\n  dir: ck/${run_id}\n");
  CHECK(c.config.checkpoint.dir == "ck/run-x");
}

TEST_CASE("$$ is a literal dollar and a lone $ stays", "[config][variables]") {
  ConfigRequest r;
  r.overrides = {"model.path=a$$b/$x"};
  CHECK(load("", r).config.model.path == "a$b/$x");
}

TEST_CASE("bad variables are errors at the value's location", "[config][variables][errors]") {
  CHECK(error_of("checkpoint:\n  dir: ${confg_dir}/x\n") ==
        "configs/x.yaml:2:8: checkpoint.dir: unknown variable ${confg_dir} (did you mean config_dir?) "
        "(known: ${config_dir}, ${run_id}, ${log_dir}, ${env:NAME})");
  CHECK(
      error_of("data:\n  path: ${env:MG_SURELY_UNSET_VAR}\n") ==
      "configs/x.yaml:2:9: data.path: ${env:MG_SURELY_UNSET_VAR}: environment variable MG_SURELY_UNSET_VAR is not set");
  CHECK(error_of("data:\n  path: ${run_id\n").find("unterminated variable") != std::string::npos);
}

TEST_CASE("cross-key rules", "[config][errors]") {
  CHECK(error_of("model:\n  type: gpt\n  d_model: 100\n  heads: 3\n") ==
        "configs/x.yaml:4:10: model.heads: 3 does not divide model.d_model = 100");
  ConfigRequest r;
  r.overrides = {"launch.run_id=a/b"};
  CHECK(error_of("", r).find("launch.run_id: 'a/b' must be a plain name") != std::string::npos);
}

TEST_CASE("a resolved config skips the environment and variable expansion", "[config]") {
  LoadOptions options = fixed_run_id();
  options.resolved = true;
  LoadedConfig c = load_config_text("launch:\n  run_id: r\ndata:\n  path: a$b\n", "run/config.yaml", {},
                                    {{"MGTRAIN_TRAIN_EPOCHS", "9"}}, options);
  CHECK(c.config.train.epochs == 1);
  CHECK(c.config.data.path == "a$b");
}

TEST_CASE("options with fixed values: every spelling round-trips, a wrong one is refused with the list", "[config]") {
  int fixed = 0;
  for (const KeyDef& key : config_schema()) {
    if (key.choices.empty() || key.choices_open) continue;
    ++fixed;
    const std::string leaf = key.path.substr(key.path.find('.') + 1);
    for (const std::string& choice : key.choices) {
      INFO(key.path << " = '" << choice << "'");
      const LoadedConfig loaded = load(key.section() + ":\n  " + leaf + ": \"" + choice + "\"\n");
      CHECK(key.read(loaded.config).Scalar() == choice);  // stored as the enum, written back with the same spelling
    }
    INFO(key.path);
    const std::string error = error_of(key.section() + ":\n  " + leaf + ": not-a-choice\n");
    CHECK_THAT(error, Catch::Contains(key.path) && Catch::Contains("'not-a-choice' is not allowed") &&
                          Catch::Contains("allowed: " + key.allowed_text()));
  }
  CHECK(fixed >= 13);  // the enum-class options of config_enums.hpp (model.type and data.dataset are open: a worker
                       // may register more, tests/config/test_plugin_catalog.cpp)
  CHECK_THAT(error_of("train:\n  precision: bf61\n"), Catch::Contains("(did you mean bf16?)"));
}

TEST_CASE("a node rank given with an endpoint and no backend means torchrun's static rendezvous", "[config]") {
  ConfigRequest request;
  request.flags = {{"launch.rdzv_endpoint", "node0:29400", "--rdzv-endpoint"},
                   {"launch.node_rank", "1", "--node-rank"}};
  LoadedConfig torchrun_line = load("", request);
  CHECK(torchrun_line.config.launch.rdzv_backend == RdzvBackend::Static);
  CHECK(torchrun_line.origin_of("launch.rdzv_backend").find("torchrun's default") != std::string::npos);

  ConfigRequest no_rank;
  no_rank.flags = {{"launch.rdzv_endpoint", "node0:29400", "--rdzv-endpoint"}};
  CHECK(load("", no_rank).config.launch.rdzv_backend == RdzvBackend::C10d);  // ranks on arrival

  request.flags.push_back({"launch.rdzv_backend", "c10d", "--rdzv-backend"});
  CHECK(load("", request).config.launch.rdzv_backend == RdzvBackend::C10d);  // an explicit backend stays
}
