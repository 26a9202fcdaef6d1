// Registered models and data sets in the config: model.type / data.dataset naming one, model.options / data.options
// from every source with their places, the check against a worker's catalog (names, options, types, defaults), and
// the catalog's YAML round trip (what `--describe-plugins` prints and the launcher reads).
#include <catch2/catch.hpp>

#include "config/config_loader.hpp"
#include "config/config_yaml.hpp"
#include "config/plugin_catalog.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;

namespace {

PluginCatalog example_catalog() {
  PluginCatalog catalog;
  catalog.models.push_back({"residual_mlp",
                            "an MLP of residual blocks",
                            {{"width", OptionType::Integer, "64", "hidden width", 1, 65536},
                             {"blocks", OptionType::Integer, "3", "residual blocks", 0, 256},
                             {"dropout", OptionType::Number, "0", "dropout", 0, 1},
                             {"sizes", OptionType::IntegerList, "[8, 8]", "widths", 1, {}},
                             {"norm", OptionType::Boolean, "true", "layer norm", {}, {}},
                             {"act", OptionType::String, "gelu", "activation", {}, {}}}});
  catalog.models.push_back({"needs_file", "", {{"vocab", OptionType::Integer, "", "vocabulary size", 1, {}}}});
  catalog.datasets.push_back({"spirals", "", {{"classes", OptionType::Integer, "3", "spirals", 2, 64}}});
  return catalog;
}

LoadedConfig load(const std::string& yaml, ConfigRequest request = {}, EnvMap env = {}) {
  LoadOptions options;
  options.make_run_id = [] { return std::string("run-x"); };
  return load_config_text(yaml, "configs/x.yaml", request, env, options);
}

// The UsageError of loading `yaml` and checking it against the example catalog.
std::string error_of(const std::string& yaml, ConfigRequest request = {}, EnvMap env = {}) {
  try {
    LoadedConfig loaded = load(yaml, request, env);
    apply_plugin_catalog(loaded, example_catalog());
  } catch (const UsageError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL("expected a UsageError");
  return "";
}

}  // namespace

TEST_CASE("a registered model's typo in its own key: file:line:column and a suggestion", "[config][plugins]") {
  const std::string yaml = "model:\n  type: residual_mlp\n  options:\n    width: 128\n    blcoks: 2\n";
  CHECK(error_of(yaml) ==
        "configs/x.yaml:5:5: model.options.blcoks: unknown option of model.type residual_mlp (did you mean blocks?) "
        "(it declares: width, blocks, dropout, sizes, norm, act)");
}

TEST_CASE("registered names, options and defaults", "[config][plugins]") {
  LoadedConfig loaded =
      load("model:\n  type: residual_mlp\n  options:\n    width: 128\n    sizes: [4, 5]\ndata:\n  dataset: spirals\n");
  CHECK(loaded.config.model.type == ModelType::Registered);
  CHECK(loaded.config.model.registered == "residual_mlp");
  CHECK(loaded.config.data.dataset == DatasetKind::Registered);
  CHECK(loaded.origin_of("model.options.width") == "configs/x.yaml:4:5");
  apply_plugin_catalog(loaded, example_catalog());
  const auto& options = loaded.config.model.options;
  CHECK(options.at("width") == "128");
  CHECK(options.at("sizes") == "[4, 5]");
  CHECK(options.at("blocks") == "3");  // the declared default
  CHECK(loaded.origin_of("model.options.blocks") == "default of residual_mlp");
  CHECK(loaded.config.data.options.at("classes") == "3");

  // What the factory reads.
  const PluginOptions read(example_catalog().models[0], options);
  CHECK(read.integer("width") == 128);
  CHECK(read.integers("sizes") == std::vector<std::int64_t>{4, 5});
  CHECK(read.number("dropout") == 0.0);
  CHECK(read.number("width") == 128.0);  // an integer reads as a number too
  CHECK(read.boolean("norm"));
  CHECK(read.string("act") == "gelu");
  CHECK_THROWS_WITH(read.integer("depth"), Contains("reads option 'depth', which it did not declare"));
  CHECK_THROWS_WITH(read.boolean("width"), Contains("reads option width as boolean, but declared it as integer"));

  // The resolved config keeps them: a worker loading it sees the same values.
  const std::string written = config_to_yaml(loaded.config);
  CHECK_THAT(written, Contains("type: residual_mlp"));
  LoadOptions resolved;
  resolved.resolved = true;
  LoadedConfig again = load_config_text(written, "resolved.yaml", {}, {}, resolved);
  CHECK(again.config.model.options == options);
  CHECK(again.config.model.registered == "residual_mlp");
  CHECK(again.config.data.registered == "spirals");
}

TEST_CASE("options from overrides, flags and the environment, entry by entry", "[config][plugins]") {
  ConfigRequest request;
  request.overrides = {"model.options.width=32", "model.options.sizes=[1, 2, 3]"};
  LoadedConfig loaded = load("model:\n  type: residual_mlp\n  options:\n    width: 128\n    blocks: 5\n", request,
                             {{"MGTRAIN_MODEL_OPTIONS_DROPOUT", "0.5"}});
  CHECK(loaded.config.model.options.at("width") == "32");
  CHECK(loaded.config.model.options.at("blocks") == "5");  // the file's entry stays
  CHECK(loaded.config.model.options.at("sizes") == "[1, 2, 3]");
  CHECK(loaded.config.model.options.at("dropout") == "0.5");
  CHECK(loaded.origin_of("model.options.width") == "override model.options.width=32");
  CHECK(loaded.origin_of("model.options.dropout") == "environment MGTRAIN_MODEL_OPTIONS_DROPOUT");
  apply_plugin_catalog(loaded, example_catalog());

  ConfigRequest typo;
  typo.overrides = {"model.type=residual_mlp", "model.options.widht=3"};
  CHECK(error_of("", typo) ==
        "override model.options.widht=3: model.options.widht: unknown option of model.type residual_mlp (did you mean "
        "width?) (it declares: width, blocks, dropout, sizes, norm, act)");
}

TEST_CASE("values of the wrong type or range, required options, unknown names", "[config][plugins]") {
  CHECK(error_of("model:\n  type: residual_mlp\n  options:\n    width: wide\n") ==
        "configs/x.yaml:4:5: model.options.width: 'wide' is not an integer (integer expected)");
  CHECK(error_of("model:\n  type: residual_mlp\n  options:\n    dropout: 2\n") ==
        "configs/x.yaml:4:5: model.options.dropout: 2 is out of range (0 to 1) (number expected)");
  CHECK(error_of("model:\n  type: residual_mlp\n  options:\n    sizes: [4, x]\n") ==
        "configs/x.yaml:4:5: model.options.sizes: element 'x' is not an integer (list of integers expected)");
  CHECK(error_of("model:\n  type: residual_mlp\n  options:\n    norm: maybe\n") ==
        "configs/x.yaml:4:5: model.options.norm: 'maybe' is not a boolean (true or false) (boolean expected)");
  CHECK_THAT(error_of("model:\n  type: residual_mlp\n  options:\n    width: {a: 1}\n"),
             Contains("expected a value or a list, got a mapping"));
  CHECK(error_of("model:\n  type: needs_file\n") ==
        "configs/x.yaml:2:9: model.options.vocab: model.type needs_file needs this option (integer: vocabulary "
        "size); add it under model.options:");
  CHECK(error_of("model:\n  type: residual_mpl\n") ==
        "configs/x.yaml:2:9: model.type: 'residual_mpl' is not a model this worker knows (did you mean "
        "residual_mlp?) (it knows: mlp, cnn, resnet, gpt, torchscript, residual_mlp, needs_file)");
  CHECK_THAT(error_of("data:\n  dataset: spiral\n"), Contains("'spiral' is not a data set this worker knows (did you "
                                                              "mean spirals?)"));
  CHECK(error_of("model:\n  type: cnn\n  options:\n    width: 3\n") ==
        "configs/x.yaml:4:5: model.options.width: the built-in model.type cnn takes no options (options are for a "
        "registered one; its own keys are under model.*)");
  // A name no worker could register, and the enum's internal spelling, are refused when loading.
  CHECK_THROWS_WITH(load("model:\n  type: 3d-net\n"), Contains("'3d-net' is neither a built-in nor a name"));
  CHECK_THROWS_WITH(load("model:\n  type: registered\n"), Contains("write the registered name itself"));
  // The stock worker (an empty catalog) says how to get a model of one's own.
  LoadedConfig stock = load("model:\n  type: residual_mlp\n");
  CHECK_THROWS_WITH(apply_plugin_catalog(stock, PluginCatalog{}),
                    Contains("needs a worker built with mgtrain::trainer"));
}

TEST_CASE("the catalog's YAML round trip, and what is not a catalog", "[config][plugins]") {
  const PluginCatalog catalog = example_catalog();
  const PluginCatalog back = catalog_from_yaml(catalog_to_yaml(catalog), "w --describe-plugins");
  REQUIRE(back.models.size() == 2);
  REQUIRE(back.datasets.size() == 1);
  CHECK(back.models[0].name == "residual_mlp");
  CHECK(back.models[0].options[3].type == OptionType::IntegerList);
  CHECK(back.models[0].options[3].default_value == "[8, 8]");
  CHECK(back.models[0].options[0].max == 65536);
  CHECK(!back.models[0].options[3].max);
  CHECK(back.models[1].options[0].default_value.empty());
  CHECK_THROWS_WITH(catalog_from_yaml("hello", "w --describe-plugins"),
                    Contains("w --describe-plugins: not a plugin catalog"));
  CHECK_THROWS_WITH(catalog_from_yaml("models: []\n", "w"), Contains("no list 'datasets'"));
  CHECK_THROWS_WITH(catalog_from_yaml("models:\n  - name: a\n    options:\n      - name: x\n        type: float\n"
                                      "datasets: []\n",
                                      "w"),
                    Contains("option type 'float'"));
}

TEST_CASE("a plugin's own declaration is checked when it registers", "[config][plugins]") {
  CHECK_THROWS_WITH(check_plugin_spec({"2net", "", {}}, "model"), Contains("a name is a letter"));
  CHECK_THROWS_WITH(check_plugin_spec({"net", "", {{"a.b", OptionType::Integer, "1", "", {}, {}}}}, "model"),
                    Contains("option name 'a.b'"));
  CHECK_THROWS_WITH(
      check_plugin_spec(
          {"net", "", {{"a", OptionType::Integer, "1", "", {}, {}}, {"a", OptionType::Integer, "1", "", {}, {}}}},
          "model"),
      Contains("option a is declared twice"));
  CHECK_THROWS_WITH(check_plugin_spec({"net", "", {{"a", OptionType::Integer, "x", "", {}, {}}}}, "data"),
                    Contains("register_data(\"net\"): the default of option a: 'x' is not an integer"));
}
