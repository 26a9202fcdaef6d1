// The registry of data sets a worker adds (see data_registry.hpp).
#include "train/data/data_registry.hpp"

#include <utility>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

struct RegisteredData {
  PluginSpec spec;
  DataFactory factory;
};

std::vector<RegisteredData>& registry() {
  static std::vector<RegisteredData> sets;
  return sets;
}

}  // namespace

void add_registered_data(PluginSpec spec, DataFactory factory) {
  check_plugin_spec(spec, "data");
  if (parse_enum<DatasetKind>(spec.name))
    throw Error(fmt::format("register_data(\"{}\"): that is a built-in data set's name", spec.name));
  for (const auto& d : registry())
    if (d.spec.name == spec.name) throw Error(fmt::format("register_data(\"{}\"): registered twice", spec.name));
  if (!factory) throw Error(fmt::format("register_data(\"{}\"): no factory", spec.name));
  registry().push_back({std::move(spec), std::move(factory)});
}

std::vector<PluginSpec> registered_data_specs() {
  std::vector<PluginSpec> specs;
  for (const auto& d : registry()) specs.push_back(d.spec);
  return specs;
}

std::unique_ptr<DataSource> open_registered_data(const DataConfig& data, Split split, std::int64_t context_length,
                                                 std::uint64_t seed) {
  for (const auto& d : registry()) {
    if (d.spec.name != data.registered) continue;
    std::unique_ptr<DataSource> source =
        d.factory(DataContext{split, data.path, seed, context_length, PluginOptions(d.spec, data.options)});
    if (!source) throw Error(fmt::format("the factory of data set {} returned nothing", data.registered));
    if (source->size() < 1)
      throw UsageError(fmt::format("data.dataset {}: the {} split has no samples", data.registered, split_name(split)));
    return source;
  }
  throw UsageError(fmt::format("data.dataset {}: this worker registers no such data set", data.registered));
}

}  // namespace mgtrain
