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
