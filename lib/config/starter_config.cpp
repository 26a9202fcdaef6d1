// Questions and commented YAML for `mgtrain config init` (see starter_config.hpp).
#include "config/starter_config.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/config_schema.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {

const std::vector<InitQuestion>& init_questions() {
  static const std::vector<InitQuestion> questions = {
      {"--nnodes", "launch.nnodes", "How many machines (nodes) will the job use?"},
      {"--nproc", "launch.nproc", "How many worker processes per node (a number, gpu, cpu or auto)?"},
      {"--device", "train.device", "Train on which device (auto, cpu, cuda)?"},
      {"--backend", "ddp.backend", "Which process group backend (auto, gloo, nccl)?"},
      {"--model", "model.type", "Which model (mlp, cnn, resnet, gpt, torchscript)?"},
      {"--dataset", "data.dataset", "Which data set format (synthetic, mnist, cifar10, tokens)?"},
      {"--data-path", "data.path", "Where is the data set?"},
      {"--batch-size", "train.batch_size", "Batch size per worker?"},
      {"--epochs", "train.epochs", "How many epochs?"},
      {"--optimizer", "optim.name", "Which optimizer (sgd, adam, adamw)?"},
      {"--lr", "optim.lr", "Learning rate?"},
  };
  return questions;
}

Config answer_init_questions(const std::vector<FlagSetting>& answers, const AskFunction* ask, std::ostream& messages) {
  Config config;
  auto try_assign = [&config](const KeyDef& key, const std::string& text) -> std::optional<std::string> {
    try {
      key.assign(config, YAML::Node(text));
      return std::nullopt;
    } catch (const ValueError& e) {
      return e.message;
    }
  };
  std::vector<std::string> answered;
  for (const auto& a : answers) {
    const KeyDef* key = find_key(a.key);
    if (!key) throw Error(fmt::format("internal error: config init flag {} maps to unknown key {}", a.flag, a.key));
    if (auto problem = try_assign(*key, a.value))
      throw UsageError(fmt::format("config init: {} {}: {}", a.flag, a.value, *problem));
    answered.push_back(a.key);
  }
  for (const auto& question : init_questions()) {
    const KeyDef& key = *find_key(question.key);
    if (!ask || std::find(answered.begin(), answered.end(), question.key) != answered.end()) continue;
    const std::string current = YAML::Dump(key.read(config));
    while (true) {
      auto line = (*ask)(fmt::format("{} [{}]: ", question.question, current));
      if (!line) return config;  // end of input: the rest keep their defaults
      const std::string text = trim(*line);
      if (text.empty()) break;
      auto problem = try_assign(key, text);
      if (!problem) break;
      messages << "  " << *problem << "\n";
    }
  }
  return config;
}

std::string starter_config_yaml(const Config& config) {
  std::string out =
      "# mgtrain config, written by `mgtrain config init`.\n"
      "# Every key is listed with its value; delete the ones you keep at their defaults.\n"
      "# Reference: docs/config.md (or `mgtrain config docs`). Check it: mgtrain config validate FILE\n";
  for (const auto& section : config_sections()) {
    out += fmt::format("\n# {}\n{}:\n", section_doc(section), section);
    for (const auto& key : config_schema()) {
      if (key.section() != section) continue;
      std::string allowed = key.allowed_text();
      out += fmt::format("  # {}{}\n", key.doc, allowed.empty() ? "" : " [" + allowed + "]");
      out += fmt::format("  {}: {}\n", key.path.substr(section.size() + 1), YAML::Dump(key.read(config)));
    }
  }
  return out;
}

}  // namespace mgtrain
