// The data sets a worker registers besides the built-ins (data.dataset NAME; the public face is
// mgtrain/registry.hpp). Registration happens in main() before run_worker, on one thread; lookups come after.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/plugin_catalog.hpp"
#include "train/data/data_source.hpp"

namespace mgtrain {

// What a registered data set's factory gets. Every rank opens both splits with the same context; the trainer's
// sampler then gives each rank its shard, so a data set returns all of its split's samples.
struct DataContext {
  Split split = Split::Train;
  std::string path;                 // data.path as the config gives it (${config_dir} expanded)
  std::uint64_t seed = 0;           // train.seed: the same on every rank
  std::int64_t context_length = 0;  // model.context_length (for sequence data)
  PluginOptions options;            // data.options.*, checked
};

using DataFactory = std::function<std::unique_ptr<DataSource>(const DataContext&)>;

// Adds a data set under spec.name. Throws Error for an invalid spec, a built-in's name or a name taken.
void add_registered_data(PluginSpec spec, DataFactory factory);
// The registered data sets' declarations, in registration order.
std::vector<PluginSpec> registered_data_specs();
// Opens `split` of the registered data set data.registered.
std::unique_ptr<DataSource> open_registered_data(const DataConfig& data, Split split, std::int64_t context_length,
                                                 std::uint64_t seed);

}  // namespace mgtrain
