// Builds the run's Config from its sources, in precedence order (lowest first):
// schema defaults < YAML file < MGTRAIN_* environment < --set / bare a.b=c < torchrun's PET_* variables
// (request.environment, read by the command line) < explicit CLI flags.
// Every value is type- and range-checked where it enters; errors name file:line:col (or the
// variable / flag) and the key path, and are thrown as UsageError (exit code 2).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/config_request.hpp"
#include "util/environment.hpp"

namespace mgtrain {

struct LoadedConfig {
  Config config;
  std::map<std::string, std::string> origin;  // key path -> where its value came from
  std::string config_dir;                     // absolute directory of the YAML file (or the cwd)
  // The config with the per-node key launch.log_dir kept as the text "${log_dir}" wherever another key
  // refers to it (the default checkpoint.dir, "${log_dir}/${run_id}/checkpoints"): what the nodes of a
  // multi-node job compare (multinode/job_fingerprint.hpp). Unset for a resolved config: use `config`.
  std::optional<Config> job_view;

  // The origin of a key no source set.
  static constexpr const char* kDefaultOrigin = "default";

  // Where `key`'s value came from; kDefaultOrigin for a key no source set (or one not in the schema).
  std::string origin_of(const std::string& key) const {
    auto found = origin.find(key);
    return found == origin.end() ? kDefaultOrigin : found->second;
  }
  // Whether no source set `key`: it has the schema's default (or one the loader chose for the personality).
  bool is_default(const std::string& key) const { return origin_of(key) == kDefaultOrigin; }
};

// A value for a key that no source set, found in the surroundings (e.g. a SLURM allocation).
struct DetectedSetting {
  std::string key;  // "launch.nnodes"
  std::string value;
  std::string origin;  // recorded in LoadedConfig::origin, e.g. "SLURM (SLURM_NNODES)"
};

struct LoadOptions {
  bool resolved = false;  // a resolved config written by the launcher: no environment layer, no ${} expansion
  std::function<std::string()> make_run_id;  // used when launch.run_id is empty; default: time + random
  // Called once every source is applied, with the config so far; its settings fill the keys still at their
  // default, before the run id is generated and ${...} is expanded. Unset: nothing is detected.
  std::function<std::vector<DetectedSetting>(const LoadedConfig&)> detect;
};

// Reads request.path (if any) and applies every layer. Throws UsageError.
LoadedConfig load_config(const ConfigRequest& request, const EnvMap& env, const LoadOptions& options = {});

// Same, with the YAML document given as text (`display_name` is used in messages).
LoadedConfig load_config_text(const std::string& yaml_text, const std::string& display_name,
                              const ConfigRequest& request, const EnvMap& env, const LoadOptions& options = {});

// A fresh run id: UTC date-time plus 4 random hex digits, e.g. 20261122-035012-a3f9.
std::string generate_run_id();

}  // namespace mgtrain
