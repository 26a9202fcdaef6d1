// The schema's public functions (see config_schema.hpp): the one copy of the key table, lookup by path,
// sections and their docs, environment names, and the "allowed" text of a key. The table itself is in
// config_schema_keys.cpp, written with the machinery of schema_builder.hpp.
#include "config/config_schema.hpp"

#include <cctype>

#include <fmt/format.h>

#include "config/schema_builder.hpp"

namespace mgtrain {

std::string KeyDef::allowed_text() const {
  if (!constraint.empty()) return constraint;
  if (!choices.empty()) {
    std::string text;
    for (const auto& c : choices) text += (text.empty() ? "" : ", ") + c;
    return "one of " + text;
  }
  const std::string what = type_name == "list of integers" ? "each element " : "";
  if (min && max)
    return fmt::format("{}{} to {}", what, schema_detail::format_bound(*min), schema_detail::format_bound(*max));
  if (min) return fmt::format("{}>= {}", what, schema_detail::format_bound(*min));
  if (max) return fmt::format("{}<= {}", what, schema_detail::format_bound(*max));
  return "";
}

const std::vector<KeyDef>& config_schema() {
  static const std::vector<KeyDef> schema = schema_detail::build_schema();
  return schema;
}

const KeyDef* find_key(const std::string& path) {
  for (const auto& k : config_schema())
    if (k.path == path) return &k;
  return nullptr;
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = {"launch", "model", "data",       "train",
                                                    "optim",  "ddp",   "checkpoint", "log"};
  return sections;
}

std::string section_doc(const std::string& section) {
  if (section == "launch") return "How workers are spawned and supervised; every key is also a `mgtrain launch` flag.";
  if (section == "model") return "The network the built-in trainer builds.";
  if (section == "data") return "The data set and its loader.";
  if (section == "train") return "The training loop.";
  if (section == "optim") return "Optimizer and learning-rate schedule.";
  if (section == "ddp") return "Process group and gradient synchronisation.";
  if (section == "checkpoint") return "When and where rank 0 saves, and what a run resumes from.";
  if (section == "log") return "Logging of the trainer.";
  return "";
}

std::string env_name_for_key(const std::string& path) {
  std::string name = "MGTRAIN_";
  for (char c : path) name += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace mgtrain
