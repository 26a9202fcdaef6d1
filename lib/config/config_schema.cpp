// The config schema table: one entry per key, bound to its Config member (see config_schema.hpp).
#include "config/config_schema.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/format.h>

#include "util/did_you_mean.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

std::string describe_node(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "'" + node.Scalar() + "'";
}

void require_scalar(const YAML::Node& node, const char* expected) {
  if (node.IsNull()) throw ValueError{"has no value (give a value, or delete the line to use the default)"};
  if (!node.IsScalar()) throw ValueError{fmt::format("expected {}, got {}", expected, describe_node(node))};
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
        if (!item.IsScalar()) throw ValueError{fmt::format("expected a list of integers, got an element that is {}", describe_node(item))};
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

std::string format_bound(double v) {
  return v == static_cast<double>(static_cast<std::int64_t>(v)) ? std::to_string(static_cast<std::int64_t>(v)) : format_number(v);
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

  Key& range(double lo, double hi) { min = lo; max = hi; return *this; }
  Key& at_least(double lo) { min = lo; return *this; }
  Key& one_of(std::vector<std::string> values) { choices = std::move(values); return *this; }
  // Choices that are suggested, plus any value `extra` accepts (e.g. checkpoint.resume: auto | never | PATH).
  Key& one_of_or(std::vector<std::string> values, std::string description) {
    choices = std::move(values);
    choices_open = true;
    constraint = std::move(description);
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
  return Key<Section, T>{std::move(path), section, field, std::move(doc), {}, {}, {}, false, {}, {}};
}

template <class T>
void check_bounds(const T& value, const std::optional<double>& min, const std::optional<double>& max,
                  const std::string& allowed) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    const double v = static_cast<double>(value);
    if ((min && v < *min) || (max && v > *max)) throw ValueError{fmt::format("{} is out of range (allowed: {})", format_bound(v), allowed)};
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
    const std::string allowed = def.allowed_text();
    def.assign = [k, allowed, choices = def.choices](Config& config, const YAML::Node& node) {
      if constexpr (std::is_enum_v<T>) {
        if (node.IsScalar() && std::find(choices.begin(), choices.end(), node.Scalar()) == choices.end())
          throw ValueError{fmt::format("'{}' is not allowed (allowed: {}){}", node.Scalar(), allowed,
                                       did_you_mean_suffix(node.Scalar(), choices))};
      }
      T value = ValueType<T>::from(node);
      check_bounds(value, k.min, k.max, allowed);
      if constexpr (std::is_same_v<T, std::string>) {
        if (!k.choices.empty() && !k.choices_open &&
            std::find(k.choices.begin(), k.choices.end(), value) == k.choices.end()) {
          throw ValueError{fmt::format("'{}' is not allowed (allowed: {}){}", value, allowed, did_you_mean_suffix(value, k.choices))};
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
  std::vector<KeyDef> take() { return std::move(keys_); }

 private:
  std::vector<KeyDef> keys_;
};

// ---- custom checks -------------------------------------------------------------------------

std::optional<std::string> check_nproc(const std::string& v) {
  if (v == "auto" || v == "gpu" || v == "cpu") return std::nullopt;
  auto n = parse_int(v);
  if (n && *n >= 1) return std::nullopt;
  return fmt::format("'{}' is not a process count", v);
}

std::optional<std::string> check_nnodes(const std::string& v) {
  auto parts = split(v, ':');
  if (parts.size() == 1) {
    auto n = parse_int(parts[0]);
    if (n && *n >= 1) return std::nullopt;
  } else if (parts.size() == 2) {
    auto lo = parse_int(parts[0]), hi = parse_int(parts[1]);
    if (lo && hi && *lo >= 1 && *lo <= *hi) return std::nullopt;
  }
  return fmt::format("'{}' is not a node count", v);
}

// "" or HOST[:PORT] (IPv6 in brackets: [::1]:29400).
std::optional<std::string> check_endpoint(const std::string& v) {
  if (trim(v).empty()) return std::nullopt;
  std::string port;
  if (v.front() == '[') {
    std::size_t close = v.find(']');
    if (close == std::string::npos || close == 1) return fmt::format("'{}' is not HOST:PORT", v);
    if (close + 1 < v.size()) {
      if (v[close + 1] != ':') return fmt::format("'{}' is not HOST:PORT", v);
      port = v.substr(close + 2);
    }
  } else {
    std::size_t colon = v.rfind(':');
    if (colon == 0) return fmt::format("'{}' has no host", v);
    if (colon != std::string::npos) {
      if (v.find(':') != colon) return fmt::format("'{}': write an IPv6 address in brackets, e.g. [::1]:29400", v);
      port = v.substr(colon + 1);
    }
  }
  if (!port.empty() || v.back() == ':') {
    auto n = parse_int(port);
    if (!n || *n < 1 || *n > 65535) return fmt::format("'{}' has no valid port (1-65535)", v);
  }
  return std::nullopt;
}

// "" or "host[:slots],host[:slots],...".
std::optional<std::string> check_hosts(const std::string& v) {
  if (trim(v).empty()) return std::nullopt;
  for (const auto& part : split(v, ',')) {
    std::string entry = trim(part);
    std::size_t colon = entry.rfind(':');
    std::string host = colon == std::string::npos ? entry : entry.substr(0, colon);
    if (host.empty()) return fmt::format("'{}' has an empty host", v);
    if (colon != std::string::npos) {
      auto n = parse_int(entry.substr(colon + 1));
      if (!n || *n < 1) return fmt::format("'{}': slots after ':' must be a positive number", entry);
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_remote_shell(const std::string& v) {
  if (v.find("{host}") == std::string::npos) return fmt::format("'{}' does not contain {{host}}", v);
  return std::nullopt;
}

// "" or a comma-separated list of non-negative integers.
std::optional<std::string> check_index_list(const std::string& v) {
  if (trim(v).empty()) return std::nullopt;
  for (const auto& part : split(v, ',')) {
    auto n = parse_int(part);
    if (!n || *n < 0) return fmt::format("'{}' is not a non-negative integer", trim(part));
  }
  return std::nullopt;
}

// launch.gpu_ids: "auto" (the GPUs with the most free memory, docs/gpu.md) or an index list.
std::optional<std::string> check_gpu_ids(const std::string& v) {
  if (trim(v) == "auto") return std::nullopt;
  return check_index_list(v);
}

// torchrun's Std spec: one digit 0-3 for all ranks, or "rank:digit,rank:digit".
std::optional<std::string> check_std_spec(const std::string& v) {
  auto is_mode = [](const std::string& s) { auto n = parse_int(s); return n && *n >= 0 && *n <= 3; };
  if (is_mode(v)) return std::nullopt;
  for (const auto& part : split(v, ',')) {
    auto kv = split(part, ':');
    auto rank = kv.size() == 2 ? parse_int(kv[0]) : std::nullopt;
    if (!rank || *rank < 0 || !is_mode(kv[1])) return fmt::format("'{}' is not a stream mapping", v);
  }
  return std::nullopt;
}

std::vector<KeyDef> build_schema() {
  SchemaBuilder s;
  using C = Config;
  // launch
  s.add(key("launch.nproc", &C::launch, &LaunchConfig::nproc, "worker processes on this node: a number, 'gpu' (one per visible GPU), 'cpu' (one per core) or 'auto' (gpu if any, else 1)")
            .must("N >= 1, auto, gpu or cpu", check_nproc));
  s.add(key("launch.nnodes", &C::launch, &LaunchConfig::nnodes, "number of nodes, or MIN:MAX for an elastic job")
            .must("N >= 1, or MIN:MAX with 1 <= MIN <= MAX", check_nnodes));
  s.add(key("launch.node_rank", &C::launch, &LaunchConfig::node_rank, "rank of this node, 0 .. nnodes-1").at_least(0));
  s.add(key("launch.master_addr", &C::launch, &LaunchConfig::master_addr, "address of the node that hosts rank 0 (MASTER_ADDR)"));
  s.add(key("launch.master_port", &C::launch, &LaunchConfig::master_port, "port of rank 0's store (MASTER_PORT); 0 picks a free port on a single node").range(0, 65535));
  s.add(key("launch.max_restarts", &C::launch, &LaunchConfig::max_restarts, "how many times the worker group is restarted after a failure").at_least(0));
  s.add(key("launch.run_id", &C::launch, &LaunchConfig::run_id, "name of this run (TORCHELASTIC_RUN_ID, log and checkpoint directory); empty: date-time plus random suffix"));
  s.add(key("launch.log_dir", &C::launch, &LaunchConfig::log_dir, "directory that holds one sub-directory per run: logs, resolved config, failure report"));
  s.add(key("launch.tee", &C::launch, &LaunchConfig::tee, "torchrun's --tee: streams shown on the console and written to files (0 none, 1 stdout, 2 stderr, 3 both; or rank:mode,...)")
            .must("0-3, or rank:mode pairs like 0:3,1:1", check_std_spec));
  s.add(key("launch.redirect", &C::launch, &LaunchConfig::redirect, "torchrun's --redirects: streams written to files only, kept off the console (same values as tee)")
            .must("0-3, or rank:mode pairs like 0:3,1:1", check_std_spec));
  s.add(key("launch.local_ranks_filter", &C::launch, &LaunchConfig::local_ranks_filter, "comma-separated local ranks whose output reaches the console; empty: all (files always get every rank)")
            .must("empty, or comma-separated local ranks", check_index_list));
  s.add(key("launch.gpu_ids", &C::launch, &LaunchConfig::gpu_ids, "GPUs to use, e.g. 0,2 (local rank i gets the i-th); auto: the nproc GPUs with the most free memory; empty: all visible")
            .must("empty, auto, or comma-separated GPU indices", check_gpu_ids));
  s.add(key("launch.grace_period", &C::launch, &LaunchConfig::grace_period, "seconds between SIGTERM and SIGKILL when stopping workers").range(0, 3600));
  s.add(key("launch.standalone", &C::launch, &LaunchConfig::standalone, "single-node job on localhost with a free port (torchrun --standalone)"));
  s.add(key("launch.slurm", &C::launch, &LaunchConfig::slurm, "inside a SLURM job: auto fills nnodes, node_rank, master_addr, master_port, run_id and nproc from SLURM_* when not given (docs/slurm.md); off ignores SLURM"));
  s.add(key("launch.slurm_requeue", &C::launch, &LaunchConfig::slurm_requeue, "inside a SLURM job: node 0 runs `scontrol requeue` when the workers saved a checkpoint and stopped (preemption), so the job resumes"));
  s.add(key("launch.heartbeat_timeout", &C::launch, &LaunchConfig::heartbeat_timeout, "seconds a heartbeating worker may stay silent before it counts as hung; 0: no watchdog").at_least(0));
  s.add(key("launch.worker", &C::launch, &LaunchConfig::worker, "path of the worker binary; empty: mgtrain-worker next to mgtrain"));
  s.add(key("launch.python", &C::launch, &LaunchConfig::python, "interpreter that runs a launched .py script or -m module"));
  s.add(key("launch.rdzv_endpoint", &C::launch, &LaunchConfig::rdzv_endpoint, "HOST[:PORT] of the dynamic rendezvous (torchrun's c10d): node ranks are assigned on arrival; the node that can bind it hosts it (port default 29400); empty: static ranks from node_rank")
            .must("empty, or HOST[:PORT]", check_endpoint));
  s.add(key("launch.rdzv_backend", &C::launch, &LaunchConfig::rdzv_backend, "with rdzv_endpoint: c10d (ranks on arrival) or static (the endpoint is node 0's master_addr:master_port); both use mgtrain's own protocol"));
  s.add(key("launch.join_timeout", &C::launch, &LaunchConfig::join_timeout, "multi-node: seconds for the nodes to meet (every node static, at least MIN dynamic) before the job fails naming the missing ones").range(0.01, 1e6));
  s.add(key("launch.last_call_timeout", &C::launch, &LaunchConfig::last_call_timeout, "dynamic rendezvous: seconds a round waits for more nodes once MIN have arrived (it closes at once with MAX)").range(0, 1e6));
  s.add(key("launch.node_timeout", &C::launch, &LaunchConfig::node_timeout, "multi-node: seconds without any message after which a node (or the rendezvous server) counts as dead").range(0.01, 1e6));
  s.add(key("launch.node_heartbeat_interval", &C::launch, &LaunchConfig::node_heartbeat_interval, "multi-node: seconds between the agents' heartbeats (at most a third of node_timeout is used)").range(0.01, 1e6));
  s.add(key("launch.allow_uneven_nproc", &C::launch, &LaunchConfig::allow_uneven_nproc, "multi-node: nodes may run different numbers of workers (ranks in node order); otherwise a different nproc is an error"));
  s.add(key("launch.hosts", &C::launch, &LaunchConfig::hosts, "start one node agent per host through remote_shell, e.g. a:4,b:4 (host:workers; the first host is node 0)")
            .must("empty, or host[:slots],...", check_hosts));
  s.add(key("launch.hostfile", &C::launch, &LaunchConfig::hostfile, "like hosts, from a file with lines `host slots=4` (# comments)"));
  s.add(key("launch.remote_shell", &C::launch, &LaunchConfig::remote_shell, "command that runs a node agent on {host}; the agent's command line follows as one shell-quoted argument")
            .must("a command containing {host}", check_remote_shell));
  s.add(key("launch.exit_with_stdin", &C::launch, &LaunchConfig::exit_with_stdin, "stop the job like SIGHUP when stdin closes (set by hosts/hostfile for remote agents, so none outlives its remote shell)"));
  s.add(key("launch.status_port", &C::launch, &LaunchConfig::status_port, "serve the status API and dashboard on this port (docs/monitoring.md); 0: off").range(0, 65535));
  s.add(key("launch.status_bind", &C::launch, &LaunchConfig::status_bind, "address the status server listens on (loopback unless you ask otherwise)"));
  // model
  s.add(key("model.type", &C::model, &ModelConfig::type, "network the built-in trainer builds"));
  s.add(key("model.hidden_sizes", &C::model, &ModelConfig::hidden_sizes, "mlp: hidden layer widths").at_least(1));
  s.add(key("model.dropout", &C::model, &ModelConfig::dropout, "dropout probability (mlp, gpt)").range(0, 1));
  s.add(key("model.channels", &C::model, &ModelConfig::channels, "cnn: output channels of each conv block").at_least(1));
  s.add(key("model.batch_norm", &C::model, &ModelConfig::batch_norm, "cnn: batch norm after each convolution"));
  s.add(key("model.fc_sizes", &C::model, &ModelConfig::fc_sizes, "cnn: widths of the fully connected layers before the classifier").at_least(1));
  s.add(key("model.resnet_blocks", &C::model, &ModelConfig::resnet_blocks, "resnet: residual blocks per stage").range(1, 64));
  s.add(key("model.layers", &C::model, &ModelConfig::layers, "gpt: transformer blocks").range(1, 1024));
  s.add(key("model.heads", &C::model, &ModelConfig::heads, "gpt: attention heads (must divide d_model)").range(1, 1024));
  s.add(key("model.d_model", &C::model, &ModelConfig::d_model, "gpt: embedding width").range(1, 65536));
  s.add(key("model.context_length", &C::model, &ModelConfig::context_length, "gpt: tokens per sample").range(1, 1 << 20));
  s.add(key("model.path", &C::model, &ModelConfig::path, "torchscript: file written by torch.jit.script(model).save(path)"));
  // data
  s.add(key("data.dataset", &C::data, &DataConfig::dataset, "data set format"));
  s.add(key("data.path", &C::data, &DataConfig::path, "directory (mnist, cifar10) or file (tokens) holding the data"));
  s.add(key("data.input_shape", &C::data, &DataConfig::input_shape, "synthetic: shape of one sample").at_least(1));
  s.add(key("data.num_classes", &C::data, &DataConfig::num_classes, "synthetic: number of classes").range(2, 1 << 20));
  s.add(key("data.synthetic_samples", &C::data, &DataConfig::synthetic_samples, "synthetic: samples in the training split").at_least(1));
  s.add(key("data.loader_threads", &C::data, &DataConfig::loader_threads, "background threads preparing batches").range(0, 64));
  s.add(key("data.prefetch_batches", &C::data, &DataConfig::prefetch_batches, "batches prepared ahead of the training step").range(1, 1024));
  s.add(key("data.shuffle", &C::data, &DataConfig::shuffle, "reshuffle the training split every epoch (seed + epoch)"));
  s.add(key("data.drop_last", &C::data, &DataConfig::drop_last, "drop the tail so every rank gets equal full batches (else pad by repeating samples)"));
  // train
  s.add(key("train.epochs", &C::train, &TrainConfig::epochs, "passes over the training split").at_least(1));
  s.add(key("train.max_steps", &C::train, &TrainConfig::max_steps, "stop after this many optimizer steps; 0: run all epochs").at_least(0));
  s.add(key("train.batch_size", &C::train, &TrainConfig::batch_size, "samples per rank per micro-step").range(1, 1 << 24));
  s.add(key("train.grad_accum_steps", &C::train, &TrainConfig::grad_accum_steps, "micro-steps per optimizer step (gradients reduced on the last)").range(1, 1 << 16));
  s.add(key("train.eval_every_steps", &C::train, &TrainConfig::eval_every_steps, "evaluate on the test split every N steps; 0: never by steps").at_least(0));
  s.add(key("train.eval_at_epoch_end", &C::train, &TrainConfig::eval_at_epoch_end, "evaluate on the test split at the end of every epoch"));
  s.add(key("train.seed", &C::train, &TrainConfig::seed, "seed of model init and data order (identical on all ranks)").at_least(0));
  s.add(key("train.clip_grad_norm", &C::train, &TrainConfig::clip_grad_norm, "clip gradients to this global norm after reduction; 0: off").at_least(0));
  s.add(key("train.device", &C::train, &TrainConfig::device, "where to train: auto (cuda:LOCAL_RANK if CUDA, else cpu)"));
  s.add(key("train.precision", &C::train, &TrainConfig::precision, "fp32; bf16: autocast to bfloat16 (CPU, CUDA); fp16: autocast to float16 with dynamic loss scaling (CUDA only)"));
  s.add(key("train.loss_scale_init", &C::train, &TrainConfig::loss_scale_init, "fp16: initial loss scale").range(1e-30, 1e30));
  s.add(key("train.loss_scale_growth_factor", &C::train, &TrainConfig::loss_scale_growth_factor, "fp16: scale multiplier after growth_interval steps without inf/nan gradients").range(1, 1e6));
  s.add(key("train.loss_scale_backoff_factor", &C::train, &TrainConfig::loss_scale_backoff_factor, "fp16: scale multiplier after a step with inf/nan gradients (the step is skipped)").range(1e-6, 1));
  s.add(key("train.loss_scale_growth_interval", &C::train, &TrainConfig::loss_scale_growth_interval, "fp16: consecutive finite steps before the scale grows").range(1, 1LL << 40));
  s.add(key("train.gpu_memory_fraction", &C::train, &TrainConfig::gpu_memory_fraction, "CUDA: cap the caching allocator at this fraction of the device's memory; 0: no cap").range(0, 1));
  // optim
  s.add(key("optim.name", &C::optim, &OptimConfig::name, "optimizer"));
  s.add(key("optim.lr", &C::optim, &OptimConfig::lr, "peak learning rate").range(0, 1e6));
  s.add(key("optim.momentum", &C::optim, &OptimConfig::momentum, "sgd momentum").range(0, 1));
  s.add(key("optim.nesterov", &C::optim, &OptimConfig::nesterov, "sgd Nesterov momentum"));
  s.add(key("optim.weight_decay", &C::optim, &OptimConfig::weight_decay, "L2 penalty (decoupled for adamw)").at_least(0));
  s.add(key("optim.beta1", &C::optim, &OptimConfig::beta1, "adam/adamw beta1").range(0, 1));
  s.add(key("optim.beta2", &C::optim, &OptimConfig::beta2, "adam/adamw beta2").range(0, 1));
  s.add(key("optim.eps", &C::optim, &OptimConfig::eps, "adam/adamw epsilon").range(0, 1));
  s.add(key("optim.schedule", &C::optim, &OptimConfig::schedule, "learning-rate schedule after warmup"));
  s.add(key("optim.warmup_steps", &C::optim, &OptimConfig::warmup_steps, "steps of linear warmup from 0 to lr").at_least(0));
  s.add(key("optim.step_size", &C::optim, &OptimConfig::step_size, "step schedule: steps between decays").at_least(1));
  s.add(key("optim.gamma", &C::optim, &OptimConfig::gamma, "step schedule: decay factor").range(0, 1));
  s.add(key("optim.min_lr", &C::optim, &OptimConfig::min_lr, "cosine/linear: final learning rate").at_least(0));
  s.add(key("optim.scale_lr_with_world_size", &C::optim, &OptimConfig::scale_lr_with_world_size, "multiply lr by the world size (linear scaling rule)"));
  // ddp
  s.add(key("ddp.backend", &C::ddp, &DdpConfig::backend, "process group backend: auto (nccl with CUDA, else gloo)"));
  s.add(key("ddp.bucket_cap_mb", &C::ddp, &DdpConfig::bucket_cap_mb, "gradient bucket size in MiB").range(0.001, 4096));
  s.add(key("ddp.first_bucket_mb", &C::ddp, &DdpConfig::first_bucket_mb, "size of the first (smallest) bucket in MiB").range(0.001, 4096));
  s.add(key("ddp.broadcast_buffers", &C::ddp, &DdpConfig::broadcast_buffers, "broadcast rank 0's buffers (e.g. batch-norm statistics) every step"));
  s.add(key("ddp.find_unused_parameters", &C::ddp, &DdpConfig::find_unused_parameters, "treat parameters without a gradient in a step as zero instead of waiting for them"));
  s.add(key("ddp.gradient_as_bucket_view", &C::ddp, &DdpConfig::gradient_as_bucket_view, "let gradients live inside the buckets: saves two copies per step (on by default, unlike Python, since the trainer owns zero_grad)"));
  s.add(key("ddp.timeout_s", &C::ddp, &DdpConfig::timeout_s, "seconds a collective may take before it fails").range(1, 1e6));
  s.add(key("ddp.connect_timeout_s", &C::ddp, &DdpConfig::connect_timeout_s, "seconds to wait for the store and all peers at start").range(1, 1e6));
  s.add(key("ddp.skip_allreduce", &C::ddp, &DdpConfig::skip_allreduce, "benchmarks only: skip the gradient all-reduce to time a step without communication (ranks diverge)"));
  s.add(key("ddp.sync_batch_norm", &C::ddp, &DdpConfig::sync_batch_norm, "synchronise batch-norm statistics over all ranks (like torch.nn.SyncBatchNorm)"));
  s.add(key("ddp.strategy", &C::ddp, &DdpConfig::strategy, "ddp: one process per device; dp: legacy single-process DataParallel over the selected GPUs (CUDA only, slower)"));
  // checkpoint
  s.add(key("checkpoint.dir", &C::checkpoint, &CheckpointConfig::dir, "directory of the run's checkpoints; empty: never save or resume"));
  s.add(key("checkpoint.every_steps", &C::checkpoint, &CheckpointConfig::every_steps, "save every N optimizer steps; 0: not by steps").at_least(0));
  s.add(key("checkpoint.every_epochs", &C::checkpoint, &CheckpointConfig::every_epochs, "save every N epochs; 0: not by epochs").at_least(0));
  s.add(key("checkpoint.every_minutes", &C::checkpoint, &CheckpointConfig::every_minutes, "save when this many minutes passed since the last save (rank 0's clock); 0: not by time").range(0, 1e6));
  s.add(key("checkpoint.at_end", &C::checkpoint, &CheckpointConfig::at_end, "save after the last step"));
  s.add(key("checkpoint.keep_last", &C::checkpoint, &CheckpointConfig::keep_last, "checkpoints kept on disk (older ones are deleted)").at_least(1));
  s.add(key("checkpoint.best_metric", &C::checkpoint, &CheckpointConfig::best_metric, "also keep the checkpoint with the best value of this eval metric (pointer file `best`); empty: off"));
  s.add(key("checkpoint.async", &C::checkpoint, &CheckpointConfig::async, "write checkpoints in a background thread (training waits only for the copy to memory)"));
  s.add(key("checkpoint.when_busy", &C::checkpoint, &CheckpointConfig::when_busy, "a save due while the previous one is still being written: wait for it, or skip this one"));
  s.add(key("checkpoint.on_write_error", &C::checkpoint, &CheckpointConfig::on_write_error, "a failed write (disk full, permissions): stop training (exit 1), or continue and warn"));
  s.add(key("checkpoint.resume", &C::checkpoint, &CheckpointConfig::resume, "auto: newest valid checkpoint in dir; never; or a checkpoint file")
            .one_of_or({"auto", "never"}, "auto, never or a path"));
  // log
  s.add(key("log.level", &C::log, &LogConfig::level, "least severe message printed"));
  s.add(key("log.every_steps", &C::log, &LogConfig::every_steps, "rank 0 prints a progress line every N steps").at_least(1));
  s.add(key("log.progress", &C::log, &LogConfig::progress, "rank 0's progress display: auto (a live bar on a TTY, plain lines otherwise), bar, lines, off"));
  s.add(key("log.metrics_every_steps", &C::log, &LogConfig::metrics_every_steps, "write a row of <run dir>/metrics.jsonl every N steps (and after every eval); 0: no metrics").at_least(0));
  s.add(key("log.tensorboard", &C::log, &LogConfig::tensorboard, "also write the metrics as TensorBoard event files under <run dir>/tensorboard"));
  s.add(key("log.resource_interval_s", &C::log, &LogConfig::resource_interval_s, "seconds between CPU%/RSS/GPU samples recorded in the metrics; 0: no sampling").range(0, 1e6));
  return s.take();
}

}  // namespace

std::string KeyDef::allowed_text() const {
  if (!constraint.empty()) return constraint;
  if (!choices.empty()) {
    std::string text;
    for (const auto& c : choices) text += (text.empty() ? "" : ", ") + c;
    return "one of " + text;
  }
  const std::string what = type_name == "list of integers" ? "each element " : "";
  if (min && max) return fmt::format("{}{} to {}", what, format_bound(*min), format_bound(*max));
  if (min) return fmt::format("{}>= {}", what, format_bound(*min));
  if (max) return fmt::format("{}<= {}", what, format_bound(*max));
  return "";
}

const std::vector<KeyDef>& config_schema() {
  static const std::vector<KeyDef> schema = build_schema();
  return schema;
}

const KeyDef* find_key(const std::string& path) {
  for (const auto& k : config_schema())
    if (k.path == path) return &k;
  return nullptr;
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = {"launch", "model", "data", "train", "optim", "ddp", "checkpoint", "log"};
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
