// register_model / register_data (see registry.hpp): the public names of the trainer's registries.
#include "mgtrain/registry.hpp"

#include <utility>

namespace mgtrain {

void register_model(PluginSpec spec, ModelFactory factory) {
  add_registered_model(std::move(spec), std::move(factory));
}

void register_data(PluginSpec spec, DataFactory factory) { add_registered_data(std::move(spec), std::move(factory)); }

}  // namespace mgtrain
