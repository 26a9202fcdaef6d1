// The catalog of a worker's registered models and data sets, its YAML form, and the check of a config against it
// (see plugin_catalog.hpp).
#include "config/plugin_catalog.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "config/yaml_document.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

constexpr OptionType kOptionTypes[] = {OptionType::Integer, OptionType::Number,      OptionType::Boolean,
                                       OptionType::String,  OptionType::IntegerList, OptionType::NumberList};

// The elements of "[a, b]" (or of "a,b" as a flag gives it).
std::vector<std::string> list_elements(const std::string& text) {
  std::string inner = trim(text);
  if (!inner.empty() && inner.front() == '[' && inner.back() == ']') inner = inner.substr(1, inner.size() - 2);
  std::vector<std::string> elements;
  if (trim(inner).empty()) return elements;
  for (const auto& part : split(inner, ',')) elements.push_back(trim(part));
  return elements;
}

// 65536, 0.5: a bound as a message prints it.
std::string bound_text(double v) {
  const bool whole = std::fabs(v) < 9.2e18 && v == static_cast<double>(static_cast<std::int64_t>(v));
  return whole ? std::to_string(static_cast<std::int64_t>(v)) : format_number(v);
}

std::optional<std::string> number_problem(const OptionSpec& spec, const std::string& text, bool integer) {
  std::optional<double> value;
  if (integer) {
    if (auto i = parse_int(text)) value = static_cast<double>(*i);
  } else {
    value = parse_number(text);
  }
  if (!value) return fmt::format("'{}' is not {}", text, integer ? "an integer" : "a number");
  if ((spec.min && *value < *spec.min) || (spec.max && *value > *spec.max)) {
    return fmt::format("{} is out of range ({} to {})", text, spec.min ? bound_text(*spec.min) : "-inf",
                       spec.max ? bound_text(*spec.max) : "inf");
  }
  return std::nullopt;
}

std::vector<std::string> names_of(const std::vector<PluginSpec>& plugins) {
  std::vector<std::string> names;
  names.reserve(plugins.size());
  for (const auto& p : plugins) names.push_back(p.name);
  return names;
}

// One section's choice (model or data) and its options.
template <class E>
void check_choice(LoadedConfig& loaded, E kind, const std::string& registered,
                  std::map<std::string, std::string>& options, const std::vector<PluginSpec>& plugins,
                  const std::string& section, const std::string& choice_key) {
  const std::string choice_path = section + "." + choice_key;
  const PluginSpec* plugin = nullptr;
  if (kind == E::Registered) {
    for (const auto& p : plugins)
      if (p.name == registered) plugin = &p;
    if (!plugin) {
      std::vector<std::string> known = builtin_names<E>();
      for (const auto& name : names_of(plugins)) known.push_back(name);
      throw UsageError(fmt::format("{}: {}: '{}' is not a {} this worker knows{} (it knows: {}){}",
                                   loaded.origin_of(choice_path), choice_path, registered,
                                   section == "model" ? "model" : "data set", did_you_mean_suffix(registered, known),
                                   fmt::join(known, ", "),
                                   plugins.empty() ? "; a model or data set of your own needs a worker built with "
                                                     "mgtrain::trainer (docs/trainer.md#bring-your-own-model)"
                                                   : ""));
    }
  }
  const std::string options_path = section + ".options";
  for (const auto& [name, text] : options) {
    const std::string path = options_path + "." + name;
    const std::string where = loaded.is_default(path) ? loaded.origin_of(options_path) : loaded.origin_of(path);
    if (!plugin) {
      throw UsageError(
          fmt::format("{}: {}: the built-in {} {} takes no options (options are for a registered one; "
                      "its own keys are under {}.*)",
                      where, path, choice_path, name_of(kind), section));
    }
    const auto spec = std::find_if(plugin->options.begin(), plugin->options.end(),
                                   [&name = name](const OptionSpec& o) { return o.name == name; });
    if (spec == plugin->options.end()) {
      std::vector<std::string> declared;
      declared.reserve(plugin->options.size());
      for (const auto& o : plugin->options) declared.push_back(o.name);
      throw UsageError(fmt::format(
          "{}: {}: unknown option of {} {}{} ({})", where, path, choice_path, plugin->name,
          did_you_mean_suffix(name, declared),
          declared.empty() ? "it declares none" : fmt::format("it declares: {}", fmt::join(declared, ", "))));
    }
    if (auto problem = option_value_problem(*spec, text))
      throw UsageError(fmt::format("{}: {}: {} ({} expected)", where, path, *problem, option_type_name(spec->type)));
  }
  if (!plugin) return;
  for (const auto& spec : plugin->options) {
    if (options.count(spec.name)) continue;
    if (spec.default_value.empty() && spec.type != OptionType::String) {
      throw UsageError(fmt::format(
          "{}: {}.{}: {} {} needs this option ({}: {}); add it under {}:", loaded.origin_of(choice_path), options_path,
          spec.name, choice_path, plugin->name, option_type_name(spec.type), spec.doc, options_path));
    }
    options[spec.name] = spec.default_value;
    loaded.origin[options_path + "." + spec.name] = "default of " + plugin->name;
  }
}

}  // namespace

bool is_registrable_name(const std::string& text) {
  if (text.empty() || !std::isalpha(static_cast<unsigned char>(text[0]))) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

const char* option_type_name(OptionType type) {
  switch (type) {
    case OptionType::Integer:
      return "integer";
    case OptionType::Number:
      return "number";
    case OptionType::Boolean:
      return "boolean";
    case OptionType::String:
      return "string";
    case OptionType::IntegerList:
      return "list of integers";
    case OptionType::NumberList:
      return "list of numbers";
  }
  return "?";
}

std::optional<std::string> option_value_problem(const OptionSpec& spec, const std::string& text) {
  switch (spec.type) {
    case OptionType::Integer:
    case OptionType::Number:
      return number_problem(spec, trim(text), spec.type == OptionType::Integer);
    case OptionType::Boolean:
      if (!parse_bool(trim(text))) return fmt::format("'{}' is not a boolean (true or false)", text);
      return std::nullopt;
    case OptionType::String:
      return std::nullopt;
    case OptionType::IntegerList:
    case OptionType::NumberList:
      for (const auto& element : list_elements(text)) {
        if (auto problem = number_problem(spec, element, spec.type == OptionType::IntegerList))
          return "element " + *problem;
      }
      return std::nullopt;
  }
  return std::nullopt;
}

void check_plugin_spec(const PluginSpec& spec, const char* kind) {
  if (!is_registrable_name(spec.name)) {
    throw Error(
        fmt::format("register_{}(\"{}\"): a name is a letter, then letters, digits, '_' or '-'", kind, spec.name));
  }
  std::set<std::string> seen;
  for (const auto& option : spec.options) {
    if (option.name.empty() || option.name.find_first_of(". \t") != std::string::npos)
      throw Error(fmt::format("register_{}(\"{}\"): option name '{}' is empty or holds '.' or blanks", kind, spec.name,
                              option.name));
    if (!seen.insert(option.name).second)
      throw Error(fmt::format("register_{}(\"{}\"): option {} is declared twice", kind, spec.name, option.name));
    if (!option.default_value.empty()) {
      if (auto problem = option_value_problem(option, option.default_value))
        throw Error(
            fmt::format("register_{}(\"{}\"): the default of option {}: {}", kind, spec.name, option.name, *problem));
    }
  }
}

std::string catalog_to_yaml(const PluginCatalog& catalog) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto* group : {&catalog.models, &catalog.datasets}) {
    out << YAML::Key << (group == &catalog.models ? "models" : "datasets") << YAML::Value << YAML::BeginSeq;
    for (const auto& plugin : *group) {
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << plugin.name;
      out << YAML::Key << "doc" << YAML::Value << plugin.doc << YAML::Key << "options" << YAML::Value << YAML::BeginSeq;
      for (const auto& o : plugin.options) {
        out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << o.name;
        out << YAML::Key << "type" << YAML::Value << option_type_name(o.type);
        out << YAML::Key << "default" << YAML::Value << YAML::DoubleQuoted << o.default_value;
        out << YAML::Key << "doc" << YAML::Value << o.doc;
        if (o.min) out << YAML::Key << "min" << YAML::Value << *o.min;
        if (o.max) out << YAML::Key << "max" << YAML::Value << *o.max;
        out << YAML::EndMap;
      }
      out << YAML::EndSeq << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

PluginCatalog catalog_from_yaml(const std::string& text, const std::string& where) {
  const YAML::Node root = load_yaml_document(text, where);
  auto bad = [&where](const std::string& what) {
    return UsageError(
        fmt::format("{}: not a plugin catalog: {} (is this an mgtrain worker of the same version?)", where, what));
  };
  if (!root.IsMap()) throw bad("expected a mapping with models: and datasets:");
  PluginCatalog catalog;
  try {
    for (const auto* group : {"models", "datasets"}) {
      const YAML::Node list = root[group];
      if (!list || !list.IsSequence()) throw bad(fmt::format("no list '{}'", group));
      for (const auto& p : list) {
        PluginSpec spec;
        spec.name = p["name"].as<std::string>();
        spec.doc = p["doc"] ? p["doc"].as<std::string>() : "";
        for (const auto& o : p["options"]) {
          OptionSpec option;
          option.name = o["name"].as<std::string>();
          const auto type_text = o["type"].as<std::string>();
          const auto* type = std::find_if(std::begin(kOptionTypes), std::end(kOptionTypes),
                                          [&](OptionType t) { return type_text == option_type_name(t); });
          if (type == std::end(kOptionTypes)) throw bad(fmt::format("option type '{}'", type_text));
          option.type = *type;
          option.default_value = o["default"] ? o["default"].as<std::string>() : "";
          option.doc = o["doc"] ? o["doc"].as<std::string>() : "";
          if (o["min"]) option.min = o["min"].as<double>();
          if (o["max"]) option.max = o["max"].as<double>();
          spec.options.push_back(std::move(option));
        }
        (std::string(group) == "models" ? catalog.models : catalog.datasets).push_back(std::move(spec));
      }
    }
  } catch (const YAML::Exception& e) {
    throw bad(e.what());
  }
  return catalog;
}

void apply_plugin_catalog(LoadedConfig& loaded, const PluginCatalog& catalog) {
  ModelConfig& model = loaded.config.model;
  DataConfig& data = loaded.config.data;
  check_choice(loaded, model.type, model.registered, model.options, catalog.models, "model", "type");
  check_choice(loaded, data.dataset, data.registered, data.options, catalog.datasets, "data", "dataset");
}

PluginOptions::PluginOptions(PluginSpec spec, std::map<std::string, std::string> values)
    : spec_(std::move(spec)), values_(std::move(values)) {}

const std::string& PluginOptions::text(const std::string& name, std::initializer_list<OptionType> types) const {
  const auto spec =
      std::find_if(spec_.options.begin(), spec_.options.end(), [&name](const OptionSpec& o) { return o.name == name; });
  if (spec == spec_.options.end())
    throw Error(fmt::format("{} reads option '{}', which it did not declare when it was registered", spec_.name, name));
  if (std::find(types.begin(), types.end(), spec->type) == types.end()) {
    throw Error(fmt::format("{} reads option {} as {}, but declared it as {}", spec_.name, name,
                            option_type_name(*types.begin()), option_type_name(spec->type)));
  }
  const auto value = values_.find(name);
  if (value == values_.end())
    throw Error(fmt::format("{}: option {} has no value (config not checked)", spec_.name, name));
  return value->second;
}

std::int64_t PluginOptions::integer(const std::string& name) const {
  return parse_int(trim(text(name, {OptionType::Integer}))).value_or(0);
}

double PluginOptions::number(const std::string& name) const {
  return parse_number(trim(text(name, {OptionType::Number, OptionType::Integer}))).value_or(0.0);
}

bool PluginOptions::boolean(const std::string& name) const {
  return parse_bool(trim(text(name, {OptionType::Boolean}))).value_or(false);
}

std::string PluginOptions::string(const std::string& name) const { return text(name, {OptionType::String}); }

std::vector<std::int64_t> PluginOptions::integers(const std::string& name) const {
  std::vector<std::int64_t> out;
  for (const auto& e : list_elements(text(name, {OptionType::IntegerList}))) out.push_back(parse_int(e).value_or(0));
  return out;
}

std::vector<double> PluginOptions::numbers(const std::string& name) const {
  std::vector<double> out;
  for (const auto& e : list_elements(text(name, {OptionType::NumberList, OptionType::IntegerList})))
    out.push_back(parse_number(e).value_or(0.0));
  return out;
}

}  // namespace mgtrain
