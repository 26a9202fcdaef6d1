// Private to lib/config (not used outside it; only config_schema.cpp and config_schema_keys.cpp include it):
// the machinery the schema table is written with. ValueType<T> converts YAML nodes to and from each value
// type used in Config (a typed launch setting through its one parse function), Key<Section, T> is a key under
// construction (`key(...)` then modifiers such as range() or must()), and SchemaBuilder::add turns it into a KeyDef
// whose assign/read are bound to the member.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/config.hpp"
#include "config/config_schema.hpp"
#include "config/plugin_catalog.hpp"
#include "util/did_you_mean.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::schema_detail {

inline std::string describe_node(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "'" + node.Scalar() + "'";
}

// An option value as text: a scalar verbatim, a list as "[a, b]". Throws ValueError for a mapping or a nested list.
inline std::string option_text(const YAML::Node& node, const std::string& name) {
  if (node.IsNull()) throw ValueError{fmt::format("option {} has no value", name)};
  if (node.IsScalar()) return node.Scalar();
  if (!node.IsSequence()) throw ValueError{fmt::format("option {}: expected a value or a list, got a mapping", name)};
  std::string text = "[";
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) throw ValueError{fmt::format("option {}: a list of plain values only", name)};
    text += (i ? ", " : "") + node[i].Scalar();
  }
  return text + "]";
}

// The YAML node of an option's text (a list for "[...]").
inline YAML::Node option_node(const std::string& text) {
  if (text.empty() || text.front() != '[' || text.back() != ']') return YAML::Node(text);
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& part : split(text.substr(1, text.size() - 2), ','))
    if (!trim(part).empty()) list.push_back(trim(part));
  list.SetStyle(YAML::EmitterStyle::Flow);
  return list;
}

inline void require_scalar(const YAML::Node& node, const char* expected) {
  if (node.IsNull()) throw ValueError{"has no value (give a value, or delete the line to use the default)"};
  // "master_addr: [::1]" in a YAML file is a list holding "::1": the text needs quotes there (not in a flag).
  const bool flow_list = node.IsSequence() && node.Style() == YAML::EmitterStyle::Flow;
  const char* quote_hint = flow_list && std::string_view(expected) == "a string"
                               ? " (in YAML a value starting with '[' is a list: quote it, e.g. '[::1]:29400')"
                               : "";
  if (!node.IsScalar())
    throw ValueError{fmt::format("expected {}, got {}{}", expected, describe_node(node), quote_hint)};
}

// Conversion between YAML nodes and each C++ value type used in Config.
template <class T, class = void>
struct ValueType;

// An option with a fixed set of values (config_enums.hpp): its spelling in YAML; add() checks the spelling
// against EnumNames<E> before from() is called, with the allowed values and a did-you-mean.
template <class E>
struct ValueType<E, std::enable_if_t<std::is_enum_v<E>>> {
  static constexpr const char* kName = "string";
  static E from(const YAML::Node& node) {
    require_scalar(node, "a string");
    auto value = parse_enum<E>(node.Scalar());
    if (!value) throw ValueError{fmt::format("'{}' is not allowed", node.Scalar())};
    return *value;
  }
  static YAML::Node to(E value) { return YAML::Node(std::string(name_of(value))); }
  static std::vector<std::string> choices() {
    std::vector<std::string> names;
    for (std::string_view name : EnumNames<E>::names) names.emplace_back(name);
    return names;
  }
};

// A launch setting with a grammar of its own (launch_settings.hpp): T::parse is the one parser, T::kAllowed the
// allowed values (the key's "allowed" text in messages and docs), text() what config show writes back.
template <class T, class = void>
struct IsTextSetting : std::false_type {};
template <class T>
struct IsTextSetting<T, std::void_t<decltype(T::parse(std::string())), decltype(T::kAllowed)>> : std::true_type {};

template <class T>
struct ValueType<T, std::enable_if_t<IsTextSetting<T>::value>> {
  static constexpr const char* kName = "string";
  static T from(const YAML::Node& node) {
    require_scalar(node, "a string");
    const Parsed<T> parsed = T::parse(node.Scalar());
    if (!parsed.ok()) throw ValueError{fmt::format("{} (allowed: {})", parsed.error(), T::kAllowed)};
    return parsed.value();
  }
  static YAML::Node to(const T& value) { return YAML::Node(value.text()); }
};

template <>
struct ValueType<std::int64_t> {
  static constexpr const char* kName = "integer";
  static std::int64_t from(const YAML::Node& node) {
    require_scalar(node, "an integer");
    auto value = parse_int(node.Scalar());
    if (!value) throw ValueError{fmt::format("expected an integer, got '{}'", node.Scalar())};
    return *value;
  }
  static YAML::Node to(std::int64_t value) { return YAML::Node(value); }
};

template <>
struct ValueType<double> {
  static constexpr const char* kName = "number";
  static double from(const YAML::Node& node) {
    require_scalar(node, "a number");
    auto value = parse_number(node.Scalar());
    if (!value) throw ValueError{fmt::format("expected a number, got '{}'", node.Scalar())};
    return *value;
  }
  static YAML::Node to(double value) { return YAML::Node(format_number(value)); }
};

template <>
struct ValueType<bool> {
  static constexpr const char* kName = "boolean";
  static bool from(const YAML::Node& node) {
    require_scalar(node, "true or false");
    auto value = parse_bool(node.Scalar());
    if (!value) throw ValueError{fmt::format("expected true or false, got '{}'", node.Scalar())};
    return *value;
  }
  static YAML::Node to(bool value) { return YAML::Node(value); }
};

template <>
struct ValueType<std::string> {
  static constexpr const char* kName = "string";
  static std::string from(const YAML::Node& node) {
    require_scalar(node, "a string");
    return node.Scalar();
  }
  static YAML::Node to(const std::string& value) { return YAML::Node(value); }
};

template <>
struct ValueType<std::vector<std::int64_t>> {
  static constexpr const char* kName = "list of integers";
  static std::vector<std::int64_t> from(const YAML::Node& node) {
    std::vector<std::int64_t> values;
    if (node.IsSequence()) {
      for (const auto& item : node) {
        if (!item.IsScalar())
          throw ValueError{fmt::format("expected a list of integers, got an element that is {}", describe_node(item))};
        auto value = parse_int(item.Scalar());
        if (!value) throw ValueError{fmt::format("expected a list of integers, got element '{}'", item.Scalar())};
        values.push_back(*value);
      }
      return values;
    }
    require_scalar(node, "a list of integers");
    // A scalar is a comma-separated list ("256,128"), as given by --set or the environment.
    if (trim(node.Scalar()).empty()) return values;
    for (const auto& part : split(node.Scalar(), ',')) {
      auto value = parse_int(part);
      if (!value) throw ValueError{fmt::format("expected a list of integers, got element '{}'", trim(part))};
      values.push_back(*value);
    }
    return values;
  }
  static YAML::Node to(const std::vector<std::int64_t>& values) {
    YAML::Node node(YAML::NodeType::Sequence);
    for (auto v : values) node.push_back(v);
    node.SetStyle(YAML::EmitterStyle::Flow);
    return node;
  }
};

// A bound as docs and messages print it: 65535, 0.001.
inline std::string format_bound(double v) {
  // Whole numbers in the int64 range print as integers; anything else (1e30, fractions) as a number. The range
  // check comes first: casting an out-of-range double to int64 is undefined behaviour.
  const bool whole = std::fabs(v) < 9.2e18 && v == static_cast<double>(static_cast<std::int64_t>(v));
  return whole ? std::to_string(static_cast<std::int64_t>(v)) : format_number(v);
}

// A key under construction: `key(...)` then modifiers, then `add()` turns it into a KeyDef.
template <class Section, class T>
struct Key {
  std::string path;
  Section Config::*section;
  T Section::*field;
  std::string doc;
  std::optional<double> min, max;
  std::vector<std::string> choices;
  bool choices_open = false;
  std::string constraint;
  std::function<std::optional<std::string>(const T&)> check;  // returns an error text
  std::function<T(T)> normalize;                              // applied before the checks: the value stored

  Key& range(double lo, double hi) {
    min = lo;
    max = hi;
    return *this;
  }
  Key& at_least(double lo) {
    min = lo;
    return *this;
  }
  Key& one_of(std::vector<std::string> values) {
    choices = std::move(values);
    return *this;
  }
  // Choices that are suggested, plus any value `extra` accepts (e.g. checkpoint.resume: auto | never | PATH).
  Key& one_of_or(std::vector<std::string> values, std::string description) {
    choices = std::move(values);
    choices_open = true;
    constraint = std::move(description);
    return *this;
  }
  // The value as it is stored (e.g. an address without its IPv6 brackets), before the checks.
  Key& normalized(std::function<T(T)> fn) {
    normalize = std::move(fn);
    return *this;
  }
  Key& must(std::string description, std::function<std::optional<std::string>(const T&)> fn) {
    constraint = std::move(description);
    check = std::move(fn);
    return *this;
  }
};

template <class Section, class T>
Key<Section, T> key(std::string path, Section Config::*section, T Section::*field, std::string doc) {
  return Key<Section, T>{std::move(path), section, field, std::move(doc), {}, {}, {}, false, {}, {}, {}};
}

template <class T>
void check_bounds(const T& value, const std::optional<double>& min, const std::optional<double>& max,
                  const std::string& allowed) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    const double v = static_cast<double>(value);
    if ((min && v < *min) || (max && v > *max))
      throw ValueError{fmt::format("{} is out of range (allowed: {})", format_bound(v), allowed)};
  } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
    for (auto element : value) check_bounds(element, min, max, allowed);
  }
}

class SchemaBuilder {
 public:
  template <class Section, class T>
  void add(const Key<Section, T>& k) {
    KeyDef def;
    def.path = k.path;
    def.type_name = ValueType<T>::kName;
    def.doc = k.doc;
    def.choices = k.choices;
    if constexpr (std::is_enum_v<T>) def.choices = ValueType<T>::choices();
    def.choices_open = k.choices_open;
    def.min = k.min;
    def.max = k.max;
    def.constraint = k.constraint;
    if constexpr (IsTextSetting<T>::value) def.constraint = T::kAllowed;
    const std::string allowed = def.allowed_text();
    def.assign = [k, allowed, choices = def.choices](Config& config, const YAML::Node& node) {
      if constexpr (std::is_enum_v<T>) {
        if (node.IsScalar() && std::find(choices.begin(), choices.end(), node.Scalar()) == choices.end())
          throw ValueError{fmt::format("'{}' is not allowed (allowed: {}){}", node.Scalar(), allowed,
                                       did_you_mean_suffix(node.Scalar(), choices))};
      }
      T value = ValueType<T>::from(node);
      if (k.normalize) value = k.normalize(std::move(value));
      check_bounds(value, k.min, k.max, allowed);
      if constexpr (std::is_same_v<T, std::string>) {
        if (!k.choices.empty() && !k.choices_open &&
            std::find(k.choices.begin(), k.choices.end(), value) == k.choices.end()) {
          throw ValueError{fmt::format("'{}' is not allowed (allowed: {}){}", value, allowed,
                                       did_you_mean_suffix(value, k.choices))};
        }
      }
      if (k.check) {
        if (auto problem = k.check(value)) throw ValueError{fmt::format("{} (allowed: {})", *problem, allowed)};
      }
      (config.*(k.section)).*(k.field) = std::move(value);
    };
    def.read = [k](const Config& config) { return ValueType<T>::to((config.*(k.section)).*(k.field)); };
    keys_.push_back(std::move(def));
  }
  // A key written by hand (registrable_key, options_key below).
  void add(KeyDef def) { keys_.push_back(std::move(def)); }
  std::vector<KeyDef> take() { return std::move(keys_); }

 private:
  std::vector<KeyDef> keys_;
};

// model.type / data.dataset: a built-in (enum E, whose last enumerator is E::Registered) or the name of one the
// worker registers, stored in `name` with the enum at E::Registered. Whether the worker knows that name is checked
// once the worker is known (config/plugin_catalog.hpp).
template <class Section, class E>
KeyDef registrable_key(std::string path, Section Config::*section, E Section::*field, std::string Section::*name,
                       std::string doc) {
  KeyDef def;
  def.path = std::move(path);
  def.type_name = "string";
  def.doc = std::move(doc);
  def.choices = builtin_names<E>();
  def.choices_open = true;
  def.constraint = "one of ";
  for (const auto& c : def.choices) def.constraint += c + ", ";
  def.constraint += "or a name the worker registers";
  def.assign = [section, field, name, path = def.path](Config& config, const YAML::Node& node) {
    require_scalar(node, "a string");
    const std::string& text = node.Scalar();
    Section& s = config.*section;
    if (text == name_of(E::Registered)) {
      throw ValueError{fmt::format("write the registered name itself (e.g. {}: my_model), not '{}'",
                                   path.substr(path.find('.') + 1), text)};
    }
    if (auto builtin = parse_enum<E>(text)) {
      s.*field = *builtin;
      (s.*name).clear();
      return;
    }
    if (!is_registrable_name(text)) {
      throw ValueError{
          fmt::format("'{}' is neither a built-in nor a name a worker can register (a letter, then "
                      "letters, digits, '_' or '-')",
                      text)};
    }
    s.*field = E::Registered;
    s.*name = text;
  };
  def.read = [section, field, name](const Config& config) {
    const Section& s = config.*section;
    return YAML::Node(s.*field == E::Registered ? s.*name : std::string(name_of(s.*field)));
  };
  return def;
}

// model.options / data.options: a mapping of a registered model's (data set's) own keys to scalar or flow-list
// values, kept as text. Each source adds to (or replaces single entries of) what the earlier ones set.
template <class Section>
KeyDef options_key(std::string path, Section Config::*section, std::map<std::string, std::string> Section::*field,
                   std::string doc) {
  KeyDef def;
  def.path = std::move(path);
  def.type_name = "mapping";
  def.doc = std::move(doc);
  def.constraint = "name: value entries the registered plugin declares";
  def.assign = [section, field](Config& config, const YAML::Node& node) {
    if (node.IsNull()) return;
    if (!node.IsMap())
      throw ValueError{fmt::format("expected a mapping of option: value, got {}", describe_node(node))};
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node name = it->first;
      const YAML::Node value = it->second;
      if (!name.IsScalar()) throw ValueError{"option names must be plain names"};
      (config.*section.*field)[name.Scalar()] = option_text(value, name.Scalar());
    }
  };
  def.read = [section, field](const Config& config) {
    YAML::Node map(YAML::NodeType::Map);
    for (const auto& [name, text] : config.*section.*field) map[name] = option_node(text);
    if (map.size() == 0) map.SetStyle(YAML::EmitterStyle::Flow);
    return map;
  };
  return def;
}

// Every key, in documentation order (config_schema_keys.cpp); config_schema() keeps the one copy.
std::vector<KeyDef> build_schema();

}  // namespace mgtrain::schema_detail
