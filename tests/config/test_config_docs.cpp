// docs/config.md must equal what the schema generates, and the starter config must load back.
#include <catch2/catch.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

#include "config/config_docs.hpp"
#include "config/config_loader.hpp"
#include "config/config_schema.hpp"
#include "config/starter_config.hpp"
#include "util/error.hpp"

using namespace mgtrain;

TEST_CASE("docs/config.md is in sync with the schema", "[docs]") {
  std::ifstream in(std::string(MGTRAIN_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  INFO("regenerate with scripts/gen-docs.sh");
  CHECK(text.str() == config_reference_markdown());
}

TEST_CASE("every key is documented with a type and a doc line", "[docs]") {
  const std::string md = config_reference_markdown();
  for (const auto& key : config_schema()) {
    INFO(key.path);
    CHECK_FALSE(key.doc.empty());
    CHECK(md.find("| `" + key.path + "` |") != std::string::npos);
  }
}

TEST_CASE("config init answers from flags and a prompt, re-asking after a bad answer", "[init]") {
  std::vector<std::string> typed = {"3", "", "banana", "cpu"};  // nnodes, nproc (default), device (bad, then good)
  std::size_t next = 0;
  AskFunction ask = [&](const std::string&) -> std::optional<std::string> {
    if (next >= typed.size()) return std::nullopt;
    return typed[next++];
  };
  std::ostringstream messages;
  Config c = answer_init_questions({{"model.type", "mlp", "--model"}}, &ask, messages);
  CHECK(c.launch.nnodes == NodeRange::exactly(3));
  CHECK(c.launch.nproc == NprocSpec::workers(1));
  CHECK(c.train.device == DeviceOption::Cpu);
  CHECK(c.model.type == ModelType::Mlp);
  CHECK(messages.str().find("'banana' is not allowed") != std::string::npos);
  CHECK_THROWS_AS(answer_init_questions({{"train.batch_size", "-1", "--batch-size"}}, nullptr, messages), UsageError);
}

TEST_CASE("the starter config loads back to the answered values", "[init]") {
  Config answered =
      answer_init_questions({{"model.type", "gpt", "--model"}, {"launch.nproc", "4", "--nproc"}}, nullptr, std::cerr);
  const std::string yaml = starter_config_yaml(answered);
  CHECK(
      yaml.find(
          "  # network the trainer builds (docs/trainer.md) [one of mlp, cnn, resnet, gpt, torchscript, or a name the "
          "worker registers]\n  type: gpt\n") != std::string::npos);
  LoadOptions options;
  options.resolved = true;
  LoadedConfig loaded = load_config_text(yaml, "starter.yaml", {}, {}, options);
  CHECK(loaded.config.model.type == ModelType::Gpt);
  CHECK(loaded.config.launch.nproc == NprocSpec::workers(4));
}
