// What a worker binary registers besides the built-ins (mgtrain/registry.hpp): its models and data sets, each with
// the options (model.options.*, data.options.*) it declares, their types, defaults and docs. The worker prints its
// catalog for `--describe-plugins` (contract/worker_binary.hpp); the launcher reads it back, so a config is checked
// against the worker that will run it, before any worker starts. Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_loader.hpp"
#include "util/error.hpp"

namespace mgtrain {

enum class OptionType { Integer, Number, Boolean, String, IntegerList, NumberList };

// "integer", "number", "boolean", "string", "list of integers", "list of numbers".
const char* option_type_name(OptionType type);

// One option a registered model or data set reads.
struct OptionSpec {
  std::string name;  // "width": model.options.width
  OptionType type = OptionType::Integer;
  std::string default_value;       // as text ("64", "0.1", "true", "[64, 64]"); empty: the option must be given
  std::string doc;                 // one line
  std::optional<double> min, max;  // inclusive bounds of a number (of each element of a list)
};

struct PluginSpec {
  std::string name;  // model.type / data.dataset
  std::string doc;
  std::vector<OptionSpec> options;
};

struct PluginCatalog {
  std::vector<PluginSpec> models;
  std::vector<PluginSpec> datasets;
};

// The catalog as the YAML document `--describe-plugins` prints, and back. from_yaml throws UsageError naming `where`
// (e.g. "./my-worker --describe-plugins") for a document that is not a catalog.
std::string catalog_to_yaml(const PluginCatalog& catalog);
PluginCatalog catalog_from_yaml(const std::string& text, const std::string& where);

// The spellings of the built-ins of E (ModelType, DatasetKind): every name but that of E::Registered.
template <class E>
std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (std::string_view name : EnumNames<E>::names)
    if (name != name_of(E::Registered)) names.emplace_back(name);
  return names;
}

// A name a worker may register a model or data set under: a letter, then letters, digits, '_' or '-'.
bool is_registrable_name(const std::string& text);

// Checks `spec` itself (what register_model is given): a registrable name, unique options of valid defaults.
// Throws Error (a programming error of the plugin) naming the plugin and the option.
void check_plugin_spec(const PluginSpec& spec, const char* kind);

// The value `text` as option `spec` reads it; nullopt with `problem` set when it does not fit the type or range.
std::optional<std::string> option_value_problem(const OptionSpec& spec, const std::string& text);

// Checks model.type / data.dataset against the built-ins and `catalog`, and every model.options / data.options
// entry against the chosen plugin's declarations (a built-in takes none): unknown names get a did-you-mean, values
// their type and range. Options left out get their defaults (a required one missing is an error). Messages start
// with the place the value came from (file:line:column, override, variable). Throws UsageError.
void apply_plugin_catalog(LoadedConfig& loaded, const PluginCatalog& catalog);

// The models (or data sets) a worker registered, with their factories, in registration order: what register_model
// (register_data) adds to and the trainer builds from. `kind` ("model", "data") names the register_ function in
// messages; `builtin` says whether a name is a built-in's, which no registration may take.
template <class Factory>
class PluginRegistry {
 public:
  PluginRegistry(const char* kind, std::function<bool(const std::string&)> builtin)
      : kind_(kind), builtin_(std::move(builtin)) {}

  // Throws Error for an invalid spec (check_plugin_spec), a built-in's name, a name taken or no factory.
  void add(PluginSpec spec, Factory factory) {
    check_plugin_spec(spec, kind_);
    const auto where = [&] { return std::string("register_") + kind_ + "(\"" + spec.name + "\"): "; };
    if (builtin_(spec.name)) throw Error(where() + "that is a built-in's name");
    if (find(spec.name)) throw Error(where() + "registered twice");
    if (!factory) throw Error(where() + "no factory");
    entries_.push_back({std::move(spec), std::move(factory)});
  }
  std::vector<PluginSpec> specs() const {
    std::vector<PluginSpec> specs;
    specs.reserve(entries_.size());
    for (const auto& entry : entries_) specs.push_back(entry.spec);
    return specs;
  }
  struct Entry {
    PluginSpec spec;
    Factory factory;
  };
  // The registration of `name`, or nullptr.
  const Entry* find(const std::string& name) const {
    for (const auto& entry : entries_)
      if (entry.spec.name == name) return &entry;
    return nullptr;
  }

 private:
  const char* kind_;
  std::function<bool(const std::string&)> builtin_;
  std::vector<Entry> entries_;
};

// A registered model's (data set's) options as its factory reads them: checked and completed by
// apply_plugin_catalog, so every declared option has a value of its type. Reading an option the plugin did not
// declare, or as another type, is a programming error of the plugin (Error naming both).
class PluginOptions {
 public:
  PluginOptions() = default;
  PluginOptions(PluginSpec spec, std::map<std::string, std::string> values);

  std::int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;  // an integer option reads as a number too
  bool boolean(const std::string& name) const;
  std::string string(const std::string& name) const;
  std::vector<std::int64_t> integers(const std::string& name) const;
  std::vector<double> numbers(const std::string& name) const;
  // Every option with its value as text, in name order (for a summary line).
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  const std::string& text(const std::string& name, std::initializer_list<OptionType> types) const;

  PluginSpec spec_;
  std::map<std::string, std::string> values_;
};

}  // namespace mgtrain
