// `config show` output: every key, schema order, and a round trip back to the same config.
#include <catch2/catch.hpp>

#include "config/config_loader.hpp"
#include "config/config_schema.hpp"
#include "config/config_yaml.hpp"

using namespace mgtrain;

TEST_CASE("the emitted YAML loads back to the same values", "[config][yaml]") {
  ConfigRequest r;
  r.overrides = {"optim.lr=0.003", "model.hidden_sizes=[512, 3]", "launch.master_addr=10.0.0.1",
                 "data.path=",     "launch.run_id=abc",           "optim.eps=1e-08"};
  LoadOptions o;
  LoadedConfig first = load_config_text("", "", r, {}, o);
  const std::string yaml = config_to_yaml(first.config);
  o.resolved = true;
  LoadedConfig second = load_config_text(yaml, "resolved.yaml", {}, {}, o);
  for (const auto& key : config_schema()) {
    INFO(key.path);
    CHECK(YAML::Dump(key.read(first.config)) == YAML::Dump(key.read(second.config)));
  }
  CHECK(yaml.find("lr: 0.003\n") != std::string::npos);
  CHECK(yaml.find("eps: 1e-08\n") != std::string::npos);
}

TEST_CASE("show-origin annotates each value", "[config][yaml]") {
  ConfigRequest r;
  r.overrides = {"train.epochs=3"};
  LoadedConfig c = load_config_text("", "", r, {}, {});
  const std::string yaml = config_to_yaml(c.config, &c.origin);
  CHECK(yaml.find("epochs: 3  # override train.epochs=3") != std::string::npos);
  CHECK(yaml.find("batch_size: 64  # default") != std::string::npos);
}

TEST_CASE("config differences name the keys and both values", "[config][yaml]") {
  ConfigRequest r;
  r.overrides = {"launch.run_id=r", "optim.lr=0.1", "train.max_steps=8"};
  const std::string before = config_to_yaml(load_config_text("", "", r, {}, {}).config);
  r.overrides = {"launch.run_id=r", "optim.lr=0.05", "train.max_steps=16", "model.hidden_sizes=[64, 32]"};
  const std::string after = config_to_yaml(load_config_text("", "", r, {}, {}).config);
  CHECK(config_differences(before, before).empty());
  const std::vector<ConfigDifference> differences = config_differences(before, after);
  const std::string text = describe_config_differences(differences);
  INFO(text);
  REQUIRE(differences.size() == 3);
  CHECK_THAT(text, Catch::Contains("optim.lr 0.1 -> 0.05") && Catch::Contains("train.max_steps 8 -> 16") &&
                       Catch::Contains("model.hidden_sizes [") && Catch::Contains("-> [64, 32]"));
  CHECK(describe_config_differences(differences, 1).find(" and 2 more") != std::string::npos);
  // A key only one side has (another version's), and a text that is no config.
  const std::vector<ConfigDifference> added = config_differences("train:\n  old_key: 1\n", "train:\n  new_key: 2\n");
  REQUIRE(added.size() == 2);
  CHECK(describe_config_differences(added) == "train.new_key (none) -> 2, train.old_key 1 -> (none)");
  CHECK(config_differences("[not, a, map", "train:\n  a: 1\n").size() == 1);
}
