// The registry of data sets a worker adds (see data_registry.hpp).
#include "train/data/data_registry.hpp"

#include <utility>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

PluginRegistry<DataFactory>& registry() {
  static PluginRegistry<DataFactory> sets(
      "data", [](const std::string& name) { return parse_enum<DatasetKind>(name).has_value(); });
  return sets;
}

}  // namespace

void add_registered_data(PluginSpec spec, DataFactory factory) { registry().add(std::move(spec), std::move(factory)); }

std::vector<PluginSpec> registered_data_specs() { return registry().specs(); }

std::unique_ptr<DataSource> open_registered_data(const DataConfig& data, Split split, std::int64_t context_length,
                                                 std::uint64_t seed) {
  const auto* entry = registry().find(data.registered);
  if (!entry) throw UsageError(fmt::format("data.dataset {}: this worker registers no such data set", data.registered));
  std::unique_ptr<DataSource> source =
      entry->factory(DataContext{split, data.path, seed, context_length, PluginOptions(entry->spec, data.options)});
  if (!source) throw Error(fmt::format("the factory of data set {} returned nothing", data.registered));
  if (source->size() < 1)
    throw UsageError(fmt::format("data.dataset {}: the {} split has no samples", data.registered, split_name(split)));
  return source;
}

}  // namespace mgtrain
