// Merges defaults, YAML file, MGTRAIN_* environment, --set overrides and flags into one Config
// (see config_loader.hpp for the precedence and the error format).
#include "config/config_loader.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/config_file.hpp"
#include "config/config_schema.hpp"
#include "config/path_variables.hpp"
#include "config/yaml_document.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> all_key_paths() {
  std::vector<std::string> paths;
  for (const auto& k : config_schema()) paths.push_back(k.path);
  return paths;
}

// Keys that were renamed: the old path names the new one in the error instead of a guess.
const std::pair<const char*, const char*> kRenamedKeys[] = {
    {"launch.heartbeat_timeout", "launch.hang_timeout"},
};

// " (renamed: NEW)" for an old key path (or its MGTRAIN_ variable), else did_you_mean_suffix.
std::string unknown_key_suffix(const std::string& name, const std::vector<std::string>& candidates) {
  for (const auto& [old_path, new_path] : kRenamedKeys) {
    if (name == old_path) return fmt::format(" (renamed: {})", new_path);
    if (name == env_name_for_key(old_path)) return fmt::format(" (renamed: {})", env_name_for_key(new_path));
  }
  return did_you_mean_suffix(name, candidates);
}

bool is_section(const std::string& path) {
  for (const auto& s : config_sections())
    if (s == path) return true;
  return false;
}

// A value given as text (environment, --set, flag) becomes a YAML node: for a list key a flow list ("[1, 2]") stays a
// list, everything else is a plain scalar, so strings are taken verbatim ("[::1]:29400" is an endpoint, not a list).
YAML::Node node_from_text(const std::string& text, const std::string& where, const KeyDef& key) {
  const std::string t = trim(text);
  if (!t.empty() && t.front() == '[' && key.type_name == "list of integers") {
    return load_yaml_document(t, [&](const YAML::Mark& mark) {
      return fmt::format("{}: {}: malformed list '{}' (at column {})", where, key.path, text,
                         mark.is_null() ? 1 : mark.column + 1);
    });
  }
  return YAML::Node(text);
}

class Merger {
 public:
  Merger(LoadedConfig& out) : out_(out) {
    for (const auto& k : config_schema()) out_.origin[k.path] = LoadedConfig::kDefaultOrigin;
  }

  // `origin` is what config show --show-origin prints; empty: `where`.
  void apply(const KeyDef& key, const YAML::Node& value, const std::string& where, const std::string& origin = "") {
    try {
      key.assign(out_.config, value);
    } catch (const ValueError& e) {
      throw UsageError(fmt::format("{}: {}: {}", where, key.path, e.message));
    }
    out_.origin[key.path] = origin.empty() ? where : origin;
  }

  void apply_file(const std::string& text, const std::string& name) {
    const YAML::Node root = load_yaml_document(text, name);
    if (!root || root.IsNull()) return;  // an empty file is a valid, empty config
    if (!root.IsMap()) {
      throw UsageError(fmt::format("{}: the config must be a mapping of sections (launch:, train:, ...), not {}",
                                   yaml_location(name, root.Mark()), root.IsSequence() ? "a list" : "a single value"));
    }
    walk(root, "", name);
  }

  void apply_environment(const EnvMap& env) {
    std::vector<std::string> known_names;
    for (const auto& k : config_schema()) known_names.push_back(env_name_for_key(k.path));
    for (const auto& [name, value] : env) {
      if (!names_config_section(name)) continue;
      const KeyDef* key = nullptr;
      for (const auto& k : config_schema())
        if (env_name_for_key(k.path) == name) key = &k;
      const std::string where = "environment " + name;
      if (!key) {
        if (apply_environment_option(name, value, where)) continue;
        throw UsageError(
            fmt::format("{}: not a config key{} (mgtrain reads MGTRAIN_<SECTION>_<KEY>; unset it or fix the name)",
                        where, unknown_key_suffix(name, known_names)));
      }
      apply(*key, node_from_text(value, where, *key), where);
    }
  }

  void apply_override(const std::string& assignment) {
    const auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(fmt::format("override '{}': expected KEY=VALUE, e.g. train.batch_size=32", assignment));
    }
    const std::string path = trim(assignment.substr(0, eq));
    const std::string where = "override " + assignment;
    if (apply_option(path, assignment.substr(eq + 1), where)) return;
    const KeyDef* key = find_key(path);
    if (!key)
      throw UsageError(fmt::format("{}: {}: unknown key{}", where, path, unknown_key_suffix(path, all_key_paths())));
    apply(*key, node_from_text(assignment.substr(eq + 1), where, *key), where);
  }

  // MGTRAIN_MODEL_OPTIONS_WIDTH=64: model.options.width (option names in lower case).
  bool apply_environment_option(const std::string& name, const std::string& value, const std::string& where) {
    for (const auto& k : config_schema()) {
      const std::string prefix = env_name_for_key(k.path) + "_";
      if (k.type_name != "mapping" || !starts_with(name, prefix) || name.size() == prefix.size()) continue;
      std::string option = name.substr(prefix.size());
      for (auto& c : option) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return apply_option(k.path + "." + option, value, where);
    }
    return false;
  }

  // model.options.NAME=VALUE (an override, or MGTRAIN_MODEL_OPTIONS_NAME): one entry of a mapping key. False when
  // `path` is not below one.
  bool apply_option(const std::string& path, const std::string& text, const std::string& where) {
    const auto dot = path.rfind('.');
    const KeyDef* mapping = dot == std::string::npos ? nullptr : find_key(path.substr(0, dot));
    if (!mapping || mapping->type_name != "mapping") return false;
    YAML::Node entry(YAML::NodeType::Map);
    const std::string value = trim(text);
    entry[path.substr(dot + 1)] =
        !value.empty() && value.front() == '['
            ? load_yaml_document(
                  value,
                  [&](const YAML::Mark&) { return fmt::format("{}: {}: malformed list '{}'", where, path, value); })
            : YAML::Node(value);
    apply(*mapping, entry, where);
    out_.origin[path] = where;
    return true;
  }

  // A detected value fills a key only while it still holds its default.
  void apply_detected(const DetectedSetting& setting) {
    const KeyDef* key = find_key(setting.key);
    if (!key) throw Error(fmt::format("internal error: detected setting for unknown key {}", setting.key));
    if (!out_.is_default(key->path)) return;
    apply(*key, node_from_text(setting.value, setting.origin, *key), setting.origin);
  }

  void apply_flag(const FlagSetting& flag) {
    const KeyDef* key = find_key(flag.key);
    if (!key) throw Error(fmt::format("internal error: flag {} maps to unknown key {}", flag.flag, flag.key));
    const std::string where = flag.where_text();
    apply(*key, node_from_text(flag.value, where, *key), where, flag.origin_text());
  }

 private:
  static bool names_config_section(const std::string& env_name) {
    for (const auto& s : config_sections()) {
      std::string prefix = env_name_for_key(s) + "_";
      if (starts_with(env_name, prefix)) return true;
    }
    return false;
  }

  void walk(const YAML::Node& map, const std::string& prefix, const std::string& file) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      // Copies (cheap handles): it-> returns a temporary proxy, and references into it dangle (ASan:
      // stack-use-after-scope, found by tests/fuzz/config_fuzzer.cpp).
      const YAML::Node key_node = it->first;
      const YAML::Node value = it->second;
      const std::string where = yaml_location(file, key_node.Mark());
      if (!key_node.IsScalar()) throw UsageError(fmt::format("{}: keys must be plain names", where));
      const std::string& name = key_node.Scalar();
      const std::string path = prefix.empty() ? name : prefix + "." + name;
      if (!seen.insert(name).second)
        throw UsageError(
            fmt::format("{}: {}: duplicate key (it is already set above in the same mapping)", where, path));
      if (const KeyDef* key = find_key(path)) {
        apply(*key, value, yaml_location(file, value.IsNull() ? key_node.Mark() : value.Mark()));
        if (key->type_name == "mapping" && value.IsMap()) {  // model.options: each entry has a place of its own
          for (auto entry = value.begin(); entry != value.end(); ++entry)
            out_.origin[path + "." + entry->first.Scalar()] = yaml_location(file, entry->first.Mark());
        }
      } else if (is_section(path)) {
        if (value.IsNull()) continue;  // "train:" with nothing below it
        if (!value.IsMap())
          throw UsageError(
              fmt::format("{}: {}: is a section; expected keys below it (e.g. {}.<key>: value)", where, path, path));
        walk(value, path, file);
      } else {
        std::vector<std::string> candidates = all_key_paths();
        for (const auto& s : config_sections()) candidates.push_back(s);
        throw UsageError(fmt::format("{}: {}: unknown key{}", where, path, unknown_key_suffix(path, candidates)));
      }
    }
  }

  LoadedConfig& out_;
};

// Replaces ${...} in every string value; run_id and log_dir first since others refer to them.
// With `log_dir_as`, other keys get that text for ${log_dir} instead of launch.log_dir's value.
void expand_all_variables(LoadedConfig& loaded, const EnvMap& env,
                          const std::optional<std::string>& log_dir_as = std::nullopt) {
  VariableScope scope;
  scope.env = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  scope.values.emplace_back("config_dir", loaded.config_dir);
  auto expand_key = [&](const KeyDef& key) {
    YAML::Node node = key.read(loaded.config);
    if (!node.IsScalar() || key.type_name != "string") return;
    const std::string& where = loaded.origin[key.path];
    try {
      key.assign(loaded.config, YAML::Node(expand_variables(node.Scalar(), scope)));
    } catch (const ValueError& e) {
      throw UsageError(fmt::format("{}: {}: {}", where, key.path, e.message));
    }
  };
  expand_key(*find_key("launch.run_id"));
  scope.values.emplace_back("run_id", loaded.config.launch.run_id);
  expand_key(*find_key("launch.log_dir"));
  scope.values.emplace_back("log_dir", log_dir_as ? *log_dir_as : loaded.config.launch.log_dir);
  for (const auto& key : config_schema()) {
    if (key.path != "launch.run_id" && key.path != "launch.log_dir") expand_key(key);
  }
}

// Rules that involve more than one key.
// torchrun's --rdzv-backend defaults to static, which takes the node rank from --node-rank; mgtrain's defaults to c10d
// (ranks on arrival), which is what a command line without --node-rank means. A node rank given without a backend is
// a torchrun command line: it gets torchrun's meaning, static.
void apply_torchrun_backend_default(LoadedConfig& loaded) {
  LaunchConfig& launch = loaded.config.launch;
  if (!loaded.is_default("launch.rdzv_backend") || loaded.is_default("launch.node_rank")) return;
  if (launch.rdzv_endpoint.empty()) return;
  launch.rdzv_backend = RdzvBackend::Static;
  loaded.origin["launch.rdzv_backend"] =
      "torchrun's default, as launch.node_rank is set (" + loaded.origin["launch.node_rank"] + ")";
}

// The torchrun personality (ConfigRequest::personality): keys no source set take what torchrun 2.x does, as its
// run.py `run()` decides before launching. A single node without --master-port (or --standalone) becomes torchrun's
// "c10d on localhost:0": MASTER_ADDR is this node's own name (--local-addr, else localhost) whatever --master-addr
// says, on a free port; several static nodes without --master-port meet at torchrun's 29500. Nodes may differ in
// nproc, as torchrun accepts. Returns whether the single-node rule applied (its run id is a uuid4, as torchrun's).
bool apply_torchrun_personality_defaults(LoadedConfig& loaded, Personality personality) {
  if (personality != Personality::Torchrun) return false;
  LaunchConfig& launch = loaded.config.launch;
  auto is_default = [&](const char* key) { return loaded.is_default(key); };
  if (is_default("launch.allow_uneven_nproc")) {
    launch.allow_uneven_nproc = true;
    loaded.origin["launch.allow_uneven_nproc"] = "torchrun's default (nodes may differ in nproc)";
  }
  const bool port_given = !is_default("launch.master_port");
  const bool endpoint_given = !launch.standalone && !launch.rdzv_endpoint.empty();
  if (launch.standalone || (!endpoint_given && !port_given && launch.nnodes.max == 1)) {
    const std::string why = launch.standalone ? "--standalone" : "one node without --master-port";
    launch.master_addr = launch.local_addr.empty() ? "localhost" : launch.local_addr;
    loaded.origin["launch.master_addr"] = "torchrun's single-node rendezvous (" + why +
                                          "): " + (launch.local_addr.empty() ? "localhost" : "--local-addr");
    launch.master_port = 0;
    loaded.origin["launch.master_port"] = "torchrun's single-node rendezvous (" + why + "): a free port";
    return true;
  }
  if (!endpoint_given && !port_given) {
    launch.master_port = 29500;
    loaded.origin["launch.master_port"] = "torchrun's default (static rendezvous of several nodes)";
  }
  return false;
}

// A random UUID (version 4), as torchrun's run() makes the run id of a single-node rendezvous (uuid.uuid4()).
std::string generate_uuid4() {
  std::random_device random;
  unsigned char bytes[16];
  for (unsigned char& byte : bytes) byte = static_cast<unsigned char>(random() & 0xffu);
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);
  std::string text;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += fmt::format("{:02x}", bytes[i]);
  }
  return text;
}

// torchrun reads no SLURM_* variable: inside an allocation it still runs what its command line says.
void apply_torchrun_slurm_default(LoadedConfig& loaded, Personality personality) {
  if (personality != Personality::Torchrun || !loaded.is_default("launch.slurm")) return;
  loaded.config.launch.slurm = SlurmMode::Off;
  loaded.origin["launch.slurm"] = "torchrun's default (torchrun reads no SLURM_* variable)";
}

void check_combinations(const LoadedConfig& loaded) {
  const Config& c = loaded.config;
  if (c.model.type == ModelType::Gpt && c.model.d_model % c.model.heads != 0) {
    throw UsageError(fmt::format("{}: model.heads: {} does not divide model.d_model = {}",
                                 loaded.origin.at("model.heads"), c.model.heads, c.model.d_model));
  }
  if (c.launch.run_id.find('/') != std::string::npos || c.launch.run_id == "." || c.launch.run_id == "..") {
    throw UsageError(fmt::format("{}: launch.run_id: '{}' must be a plain name (it becomes a directory name)",
                                 loaded.origin.at("launch.run_id"), c.launch.run_id));
  }
}

}  // namespace

std::string generate_run_id() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  std::random_device random;
  return fmt::format("{}-{:04x}", stamp, random() & 0xffffu);
}

namespace {

// A message quotes the values and keys it is about, which may be megabytes long (a 16 MiB scalar): of a longer one
// the start (where and what) and the end (the allowed values) are kept.
constexpr std::size_t kMaxMessageChars = 4096;

std::string bounded_message(const std::string& message) {
  constexpr std::size_t kHead = 2000, kTail = 1000;
  return fmt::format("{}[... {} characters left out ...]{}", message.substr(0, kHead), message.size() - kHead - kTail,
                     message.substr(message.size() - kTail));
}

LoadedConfig load_all_sources(const std::string& yaml_text, const std::string& display_name,
                              const ConfigRequest& request, const EnvMap& env, const LoadOptions& options) {
  LoadedConfig loaded;
  Merger merger(loaded);
  if (!display_name.empty()) {
    std::error_code ec;
    fs::path dir = fs::absolute(fs::path(display_name), ec).parent_path();
    loaded.config_dir = dir.lexically_normal().string();
    merger.apply_file(yaml_text, display_name);
  } else {
    std::error_code ec;
    loaded.config_dir = fs::current_path(ec).string();
  }
  if (!options.resolved) merger.apply_environment(env);
  for (const auto& assignment : request.overrides) merger.apply_override(assignment);
  for (const auto& setting : request.environment) merger.apply_flag(setting);
  for (const auto& flag : request.flags) merger.apply_flag(flag);
  apply_torchrun_slurm_default(loaded, request.personality);
  if (options.detect) {
    for (const auto& setting : options.detect(loaded)) merger.apply_detected(setting);
  }

  apply_torchrun_backend_default(loaded);
  const bool torchrun_uuid = apply_torchrun_personality_defaults(loaded, request.personality);
  if (loaded.config.launch.run_id.empty()) {
    loaded.config.launch.run_id = options.make_run_id ? options.make_run_id()
                                  : torchrun_uuid     ? generate_uuid4()
                                                      : generate_run_id();
    loaded.origin["launch.run_id"] = "generated";
  }
  if (!options.resolved) {
    Config unexpanded = loaded.config;
    expand_all_variables(loaded, env);
    // The same expansion with the per-node ${log_dir} left symbolic (errors were raised above already).
    LoadedConfig view = loaded;
    view.config = std::move(unexpanded);
    expand_all_variables(view, env, std::string("${log_dir}"));
    loaded.job_view = std::move(view.config);
  }
  check_combinations(loaded);
  return loaded;
}

}  // namespace

LoadedConfig load_config_text(const std::string& yaml_text, const std::string& display_name,
                              const ConfigRequest& request, const EnvMap& env, const LoadOptions& options) {
  try {
    return load_all_sources(yaml_text, display_name, request, env, options);
  } catch (const UsageError& e) {
    // Every config error is one line, and the values it quotes are shown with their control characters escaped,
    // line feeds and tabs too (Error escapes the others, NUL included, where the message is made).
    const std::string message = escape_control_characters(e.what());
    if (message.size() <= kMaxMessageChars) {
      if (message == e.what()) throw;
      throw UsageError(message);
    }
    throw UsageError(bounded_message(message));
  }
}

LoadedConfig load_config(const ConfigRequest& request, const EnvMap& env, const LoadOptions& options) {
  if (!request.path) return load_config_text("", "", request, env, options);
  return load_config_text(read_bounded_file(*request.path, "config file"), *request.path, request, env, options);
}

}  // namespace mgtrain
