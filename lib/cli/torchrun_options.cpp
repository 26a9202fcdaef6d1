// torchrun 2.15's launch options and PET_* variables (see torchrun_options.hpp); docs/torchrun.md is the table
// for people. Each option without a launch key has a handler here; refusals say why and what to use instead.
#include "cli/torchrun_options.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/cli.hpp"
#include "config/launch_settings.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::cli_detail {
namespace {

[[noreturn]] void refuse(const ValueSource& source, const std::string& reason) {
  throw UsageError(fmt::format("{}: {}", source.where, reason));
}

void check_nproc_value(const ValueSource& source, const std::string& value, TorchrunExtras&) {
  if (trim(value) == "xpu") {
    refuse(source, "mgtrain runs workers on NVIDIA GPUs or CPUs only: use a number, gpu, cpu or auto");
  }
}

void check_rdzv_backend(const ValueSource& source, const std::string& value, TorchrunExtras&) {
  const std::string backend = trim(value);
  if (backend == "etcd" || backend == "etcd-v2") {
    refuse(source,
           "mgtrain has its own rendezvous and no etcd client: use --rdzv-backend c10d --rdzv-endpoint HOST:PORT "
           "(the node that can bind HOST:PORT hosts the rendezvous; docs/multinode.md)");
  }
}

void apply_rdzv_conf(const ValueSource& source, const std::string& value, TorchrunExtras& out) {
  for (auto& setting : rdzv_conf_settings(source, value, out.notices)) out.settings.push_back(std::move(setting));
}

void apply_module(const ValueSource&, const std::string&, TorchrunExtras& out) { out.module = true; }
void apply_no_python(const ValueSource&, const std::string&, TorchrunExtras& out) { out.no_python = true; }
void apply_run_path(const ValueSource&, const std::string&, TorchrunExtras& out) { out.run_path = true; }

void check_monitor_interval(const ValueSource& source, const std::string& value, TorchrunExtras&) {
  const auto seconds = parse_number(value);
  if (!seconds || *seconds < 0) refuse(source, fmt::format("'{}' is not a number of seconds", value));
}

void check_start_method(const ValueSource& source, const std::string& value, TorchrunExtras&) {
  if (value != "spawn" && value != "fork" && value != "forkserver") {
    refuse(source, fmt::format("'{}' is not a start method: use spawn, fork or forkserver", value));
  }
}

void accept_any(const ValueSource&, const std::string&, TorchrunExtras&) {}

void apply_prefix_template(const ValueSource&, const std::string& value, TorchrunExtras& out) {
  if (!value.empty()) out.log_line_prefix_template = value;  // torchrun: `args.template or the variable`
}

void apply_duplicate_stdout_filters(const ValueSource&, const std::string& value, TorchrunExtras& out) {
  out.duplicate_stdout_filters = value;
}
void apply_duplicate_stderr_filters(const ValueSource&, const std::string& value, TorchrunExtras& out) {
  out.duplicate_stderr_filters = value;
}

// torchrun loads the LogsSpecs class from the entry point group torchrun.logs_specs; torch registers one, "default"
// (DefaultLogsSpecs, what torchrun uses without the flag). Others are plugins of other Python packages.
void check_logs_specs(const ValueSource& source, const std::string& value, TorchrunExtras&) {
  if (value == "default") return;
  refuse(source,
         "LogsSpecs plugins are Python entry points, which mgtrain's launcher (no Python) cannot load: use "
         "--log-dir, --tee, --redirects and --local-ranks-filter; every rank's output is in "
         "<log dir>/<run id>/attempt_N/rank_R/ (--logs-specs default, torch's own, is accepted)");
}

void refuse_numa_binding(const ValueSource& source, const std::string&, TorchrunExtras&) {
  refuse(source,
         "mgtrain does not bind workers to NUMA nodes: run the program under numactl, e.g. "
         "-- numactl --cpunodebind=${local_rank} --membind=${local_rank} python3 train.py "
         "(${local_rank} is replaced per worker)");
}

void refuse_print_completion(const ValueSource& source, const std::string&, TorchrunExtras&) {
  refuse(source, "mgtrain prints no shell completion script: --help lists every flag");
}

// Columns: dest, names, metavar, reads_pet, store_true, key, apply, torchrun's help, default, mgtrain's note.
const std::vector<TorchrunOption> kOptions = {
    {"nnodes", "--nnodes", nullptr, true, false, "launch.nnodes", nullptr,
     "Number of nodes, or the range of nodes in form <minimum_nodes>:<maximum_nodes>.", "1:1", ""},
    {"nproc_per_node", "--nproc-per-node,--nproc_per_node", nullptr, true, false, "launch.nproc", check_nproc_value,
     "Number of workers per node; supported values: [auto, cpu, gpu, xpu, int].", "1",
     "xpu is refused (NVIDIA GPUs and CPUs only)"},
    {"rdzv_backend", "--rdzv-backend,--rdzv_backend", nullptr, true, false, "launch.rdzv_backend", check_rdzv_backend,
     "Rendezvous backend.", "static", "c10d and static use mgtrain's own rendezvous; etcd and etcd-v2 are refused"},
    {"rdzv_endpoint", "--rdzv-endpoint,--rdzv_endpoint", nullptr, true, false, "launch.rdzv_endpoint", nullptr,
     "Rendezvous backend endpoint; usually in form <host>:<port>.", nullptr,
     "HOST:0 with --nnodes 1 runs a single node on a free port"},
    {"rdzv_id", "--rdzv-id,--rdzv_id", nullptr, true, false, "launch.run_id", nullptr, "User-defined group id.",
     nullptr, "it names the run's log directory; without it the run id is generated (one node: a random UUID)"},
    {"rdzv_conf", "--rdzv-conf,--rdzv_conf", nullptr, true, false, nullptr, apply_rdzv_conf,
     "Additional rendezvous configuration (<key1>=<value1>,<key2>=<value2>,...).", nullptr,
     "KEY=VALUE,...: join_timeout, last_call_timeout and timeout (= join_timeout), keep_alive_interval "
     "(node_heartbeat_interval), keep_alive_max_attempt (node_timeout = attempts x interval) set launch keys; "
     "close_timeout, read_timeout, is_host, use_libuv and store_type=tcp have no effect; others are refused"},
    {"standalone", "--standalone", nullptr, true, true, "launch.standalone", nullptr,
     "Start a local standalone rendezvous backend on a free port. Useful when launching single-node, multi-worker "
     "job. If specified --rdzv-backend, --rdzv-endpoint, --rdzv-id are auto-assigned and any explicitly set values "
     "are ignored.",
     nullptr, ""},
    {"max_restarts", "--max-restarts,--max_restarts", nullptr, true, false, "launch.max_restarts", nullptr,
     "Maximum number of worker group restarts before failing.", "0", "", ArgparseType::kInt},
    {"monitor_interval", "--monitor-interval,--monitor_interval", nullptr, true, false, nullptr, check_monitor_interval,
     "Interval, in seconds, to monitor the state of workers.", "0.1",
     "accepted, no effect: mgtrain reacts to worker exits at once (one event loop), it does not poll",
     ArgparseType::kFloat},
    {"start_method", "--start-method,--start_method", "{spawn,fork,forkserver}", true, false, nullptr,
     check_start_method, "Multiprocessing start method to use when creating workers.", "spawn",
     "accepted (spawn, fork or forkserver), no effect: every worker is a new process, fork+exec"},
    {"event_log_handler", "--event-log-handler,--event_log_handler", nullptr, true, false, nullptr, accept_any,
     "name of a registered event logging handler (see: https://docs.pytorch.org/docs/stable/elastic/events.html)",
     "null",
     "accepted, no effect: mgtrain records the run's events (start, restarts, failures, outcome) in <run "
     "dir>/run.json"},
    {"role", "--role", nullptr, true, false, "launch.role", nullptr, "User-defined role for the workers.", "default",
     ""},
    {"module", "-m,--module", nullptr, true, true, nullptr, apply_module,
     "Change each process to interpret the launch script as a Python module, executing with the same behavior as "
     "'python -m'.",
     nullptr, "the program is a Python module: python3 -u -m MODULE"},
    {"no_python", "--no-python,--no_python", nullptr, true, true, nullptr, apply_no_python,
     "Skip prepending the training script with 'python' - just execute it directly. Useful when the script is not a "
     "Python script.",
     nullptr, "run the program itself, not under launch.python"},
    {"run_path", "--run-path,--run_path", nullptr, true, true, nullptr, apply_run_path,
     "Run the training script with runpy.run_path in the same interpreter. Takes precedence over --no-python.", nullptr,
     "run the program under launch.python whatever its name (torchrun: runpy.run_path); wins over --no-python"},
    {"log_dir", "--log-dir,--log_dir", nullptr, true, false, "launch.log_dir", nullptr,
     "Base directory to use for log files. The same directory is reused for multiple runs (a unique job-level "
     "sub-directory is created with rdzv_id as the prefix).",
     "a temporary directory, $TMPDIR/mgtrain-<user>/runs",
     "each rank's logs are in <log dir>/<run id>/attempt_N/rank_R/"},
    {"redirects", "-r,--redirects", nullptr, true, false, "launch.redirect", nullptr,
     "Redirect std streams into a log file in the log directory (e.g. [-r 3] redirects both stdout+stderr for all "
     "workers, [-r 0:1,1:2] redirects stdout for local rank 0 and stderr for local rank 1).",
     "0", ""},
    {"tee", "-t,--tee", nullptr, true, false, "launch.tee", nullptr,
     "Tee std streams into a log file and also to console (see --redirects for format).", "0", ""},
    {"log_line_prefix_template", "--log-line-prefix-template,--log_line_prefix_template", nullptr, true, false, nullptr,
     apply_prefix_template,
     "Template for the prefix prepended to each console log line of a tee'd stream (e.g. "
     "[--log-line-prefix-template '${hostname}:${rank}: '] renders as 'r12i0n8:3: '). Available macros: "
     "${role_name}, ${local_rank}, ${rank}, ${hostname}.",
     "'[${role_name}${local_rank}]:'",
     "the console line prefix: the launcher runs with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE set to it"},
    {"local_ranks_filter", "--local-ranks-filter,--local_ranks_filter", nullptr, true, false,
     "launch.local_ranks_filter", nullptr,
     "Only show logs from specified ranks in console (e.g. [--local_ranks_filter=0,1,2] will only show logs from rank "
     "0, 1 and 2). This will only apply to stdout and stderr, not to log files saved via --redirect or --tee.",
     "every rank", ""},
    {"duplicate_stdout_filters", "--duplicate-stdout-filters,--duplicate_stdout_filters", nullptr, true, false, nullptr,
     apply_duplicate_stdout_filters,
     "Duplicates logs streamed to stdout to another specified file with a list of filters (e.g. "
     "[--duplicate_stdout_filters 'apple,orange'] will duplicate log lines matching 'apple' OR 'orange'). Use double "
     "comma to escape a comma.",
     nullptr,
     "A,B: console lines of stdout containing A or B are also copied to <run dir>/attempt_N/filtered_stdout.log "
     "(',,' is a literal comma)"},
    {"duplicate_stderr_filters", "--duplicate-stderr-filters,--duplicate_stderr_filters", nullptr, true, false, nullptr,
     apply_duplicate_stderr_filters,
     "Duplicates logs streamed to stderr to another specified file with a list of filters (see "
     "--duplicate-stdout-filters).",
     nullptr, "the same for stderr: <run dir>/attempt_N/filtered_stderr.log"},
    {"node_rank", "--node-rank,--node_rank", nullptr, true, false, "launch.node_rank", nullptr,
     "Rank of the node for multi-node distributed training. It is only used for static rendezvous (i.e., when "
     "--rdzv-backend=static).",
     "0", "", ArgparseType::kInt},
    {"master_addr", "--master-addr,--master_addr", nullptr, true, false, "launch.master_addr", nullptr,
     "Address of the master node (rank 0) that only used for static rendezvous. It should be either the IP address "
     "or the hostname of rank 0. For single node multi-proc training the --master-addr can simply be 127.0.0.1; IPv6 "
     "should have the pattern `[0:0:0:0:0:0:0:1]`.",
     "127.0.0.1", ""},
    {"master_port", "--master-port,--master_port", nullptr, true, false, "launch.master_port", nullptr,
     "Port on the master node (rank 0) to be used for communication during distributed training. It is only used for "
     "static rendezvous.",
     "29500", "", ArgparseType::kInt},
    {"local_addr", "--local-addr,--local_addr", nullptr, true, false, "launch.local_addr", nullptr,
     "Address of the local node. If specified, will use the given address for connection. Else, will look up the "
     "local node address instead. Else, it will be default to local machine's FQDN.",
     nullptr, ""},
    {"logs_specs", "--logs-specs,--logs_specs", nullptr, false, false, nullptr, check_logs_specs,
     "torchrun.logs_specs group entrypoint name, value must be type of LogsSpecs. Can be used to override custom "
     "logging behavior.",
     nullptr,
     "default (torch's own LogsSpecs) is accepted, no effect; other names are Python plugins, refused: use --log-dir, "
     "--tee, --redirects, --local-ranks-filter"},
    {"numa_binding", "--numa-binding,--numa_binding", "{node,socket,exclusive,core-complex}", false, false, nullptr,
     refuse_numa_binding,
     "Bind worker processes to CPUs near their assigned GPUs for better performance. See torch/numa/binding.py for "
     "available modes and details.",
     nullptr, "refused: run the program under numactl (${local_rank} is replaced per worker)"},
    {"signals_to_handle", "--signals-to-handle,--signals_to_handle", nullptr, true, false, "launch.signals_to_handle",
     nullptr,
     "Comma-separated list of signals to handle and forward to subprocesses. Common additional signals: "
     "SIGUSR1,SIGUSR2 (used in SLURM environments).",
     SignalList::kDefaultText,
     "SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 only; acted on in the torchrun personality"},
    {"shutdown_timeout", "--shutdown-timeout,--shutdown_timeout", nullptr, true, false, "launch.grace_period", nullptr,
     "Time in seconds to wait for graceful shutdown of worker processes before sending SIGKILL. If not specified, "
     "uses TORCH_ELASTIC_SHUTDOWN_TIMEOUT environment variable.",
     "30", "", ArgparseType::kInt},
    {"virtual_local_rank", "--virtual-local-rank,--virtual_local_rank", nullptr, true, true,
     "launch.virtual_local_rank", nullptr,
     "Enable virtual local rank mode for workers. When enabled, LOCAL_RANK is set to 0 for all workers and "
     "CUDA_VISIBLE_DEVICES is adjusted so each worker accesses its assigned GPU at device index 0.",
     nullptr, ""},
    {"print_completion", "--print-completion,--print_completion", "{bash,zsh,tcsh}", false, false, nullptr,
     refuse_print_completion, "Print a shell completion script for torchrun to stdout and exit.", nullptr,
     "refused: mgtrain prints no completion script"},
};

// torchrun's check_env: bool(int(value)).
bool pet_flag_value(const std::string& name, const std::string& value) {
  const auto number = parse_int(trim(value));
  if (!number) {
    throw UsageError(
        fmt::format("environment {}={}: torchrun reads {} as an integer: 1 (on) or 0 (off)", name, value, name));
  }
  return *number != 0;
}

// Python's int(text) and float(text) accept it (what argparse's type=int and type=float call): surrounding whitespace
// (trim's), a sign, decimal digits with single underscores between them; float also a fraction, an exponent, inf,
// infinity and nan in any case. (Non-ASCII digits, which Python also takes, are not accepted here.)
// Digits with single underscores between them, from `at`; returns the index after them (`at` when there are none).
std::size_t python_digits(const std::string& text, std::size_t at) {
  std::size_t end = at;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) {
    ++end;
    if (end + 1 < text.size() && text[end] == '_' && std::isdigit(static_cast<unsigned char>(text[end + 1]))) ++end;
  }
  return end;
}

bool python_int_text(const std::string& raw) {
  const std::string text = trim(raw);
  const std::size_t start = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  const std::size_t end = python_digits(text, start);
  return end > start && end == text.size();
}

bool python_float_text(const std::string& raw) {
  std::string text = trim(raw);
  std::size_t at = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  std::string word = text.substr(at);
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
  if (word == "inf" || word == "infinity" || word == "nan") return true;
  const std::size_t whole = python_digits(text, at);
  bool digits = whole > at;
  at = whole;
  if (at < text.size() && text[at] == '.') {
    const std::size_t fraction = python_digits(text, at + 1);
    digits = digits || fraction > at + 1;
    at = fraction;
  }
  if (!digits) return false;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    std::size_t exponent = at + 1;
    if (exponent < text.size() && (text[exponent] == '+' || text[exponent] == '-')) ++exponent;
    const std::size_t end = python_digits(text, exponent);
    if (end == exponent) return false;
    at = end;
  }
  return at == text.size();
}

// An option's choices, from its metavar "{a,b,c}" (argparse's own metavar for choices); empty: any value.
std::vector<std::string> choices_of(const TorchrunOption& option) {
  const std::string metavar = option.metavar ? option.metavar : "";
  if (metavar.size() < 2 || metavar.front() != '{' || metavar.back() != '}') return {};
  return split(metavar.substr(1, metavar.size() - 2), ',');
}

// rdzv_conf keys that have no effect in mgtrain, and why that is harmless.
const std::map<std::string, const char*> kRdzvNoEffect = {
    {"close_timeout", "mgtrain's rendezvous closes at once"},
    {"read_timeout", "mgtrain's agents use launch.node_timeout"},
    {"is_host", "the node that can bind the endpoint hosts the rendezvous"},
    {"use_libuv", "a TCPStore detail"},
};

// rdzv_conf keys torch reads as integers (get_as_int, and the static backend's int(timeout)).
const std::set<std::string> kRdzvIntegers = {
    "join_timeout",        "last_call_timeout",      "close_timeout", "heartbeat_timeout",
    "keep_alive_interval", "keep_alive_max_attempt", "read_timeout",  "timeout"};

std::string without_quotes(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c != '"' && c != '\'') out += c;
  return out;
}

}  // namespace

const std::vector<TorchrunOption>& torchrun_options() { return kOptions; }

const TorchrunOption* torchrun_option_for_key(const std::string& key) {
  for (const auto& option : kOptions)
    if (option.key && key == option.key) return &option;
  return nullptr;
}

const TorchrunOption* torchrun_option_spelled(const std::string& flag) {
  for (const auto& option : kOptions)
    for (const auto& name : split(option.names, ','))
      if (name == flag) return &option;
  return nullptr;
}

std::string check_as_argparse(const TorchrunOption& option, const ValueSource& source, const std::string& value,
                              bool from_environment) {
  if (option.store_true) return value;
  const std::vector<std::string> choices = choices_of(option);
  if (!from_environment && !choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end()) {
    throw CommandLineError(
        fmt::format("{}: invalid choice '{}' (choose from {})", source.where, value, fmt::join(choices, ", ")));
  }
  if (option.type == ArgparseType::kStr) return value;
  const bool integer = option.type == ArgparseType::kInt;
  if (integer ? !python_int_text(value) : !python_float_text(value)) {
    throw CommandLineError(fmt::format("{}: '{}' is not {} (torchrun's parser reads it with {}())", source.where, value,
                                       integer ? "an integer" : "a number", integer ? "int" : "float"));
  }
  // The number as Python reads it: no spaces, underscores or '+'.
  std::string number;
  for (char c : trim(value))
    if (c != '_') number += c;
  return number.front() == '+' ? number.substr(1) : number;
}

std::string pet_name(const TorchrunOption& option) {
  std::string name = "PET_";
  for (const char* c = option.dest; *c; ++c) name += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
  return name;
}

std::vector<FlagSetting> rdzv_conf_settings(const ValueSource& source, const std::string& text,
                                            std::vector<std::string>& notices) {
  std::map<std::string, std::string> conf;
  std::vector<std::string> unknown;
  for (const auto& part : split(text, ',')) {
    if (trim(part).empty() && trim(text).empty()) continue;
    const auto eq = part.find('=');
    const std::string name = trim(part.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : trim(part.substr(eq + 1));
    if (name.empty()) refuse(source, "write the rendezvous options as KEY=VALUE,KEY=VALUE, e.g. join_timeout=900");
    if (value.empty()) refuse(source, fmt::format("rendezvous option '{}' has no value", name));
    // torchrun keeps quotes (torch.distributed.elastic.rendezvous.utils): a quoted key is one it does not know, which
    // it ignores; a quoted number is refused when torch reads it as an integer (int('"60"')). `timeout` is read by
    // the static backend only (int()), never by c10d, which torchrun uses on one node: a quoted one is ignored.
    if (name.find_first_of("\"'") != std::string::npos) continue;
    const bool quoted_value = value.find_first_of("\"'") != std::string::npos;
    if (quoted_value && name == "timeout") {
      notices.push_back(fmt::format(
          "{}: rendezvous option timeout={} has quotes, so it is ignored (torchrun's c10d rendezvous ignores timeout; "
          "its static one refuses a quoted value): write timeout={} to set launch.join_timeout",
          source.where, value, without_quotes(value)));
      continue;
    }
    if (quoted_value && kRdzvIntegers.count(name)) {
      refuse(source, fmt::format("rendezvous option '{}': {} is not an integer (torchrun refuses it too): write {}={} "
                                 "without quotes",
                                 name, value, name, without_quotes(value)));
    }
    conf[name] = value;
  }
  std::vector<FlagSetting> settings;
  auto set = [&](const std::string& key, const std::string& value, const std::string& from) {
    const std::string spelled = source.name + " " + from;
    settings.push_back({key, value, source.name, spelled, source.where});
  };
  double interval = 5;  // torchrun's keep_alive_interval default
  for (const auto& [name, value] : conf) {
    const std::string item = name + "=" + value;
    if (name == "join_timeout" || (name == "timeout" && !conf.count("join_timeout"))) {
      set("launch.join_timeout", value, item);
    } else if (name == "last_call_timeout") {
      set("launch.last_call_timeout", value, item);
    } else if (name == "keep_alive_interval") {
      set("launch.node_heartbeat_interval", value, item);
      if (auto seconds = parse_number(value)) interval = *seconds;
    } else if (name == "store_type" && value != "tcp") {
      refuse(source, fmt::format("store_type '{}': mgtrain's rendezvous runs over TCP only (store_type=tcp)", value));
    } else if (name == "rank") {
      refuse(source, "rank: give the node's rank with --node-rank (static rendezvous)");
    } else if (name == "is_host" && !parse_bool(value)) {
      refuse(source, fmt::format("is_host '{}' is not a boolean (true/false, 1/0)", value));
    } else if (!kRdzvNoEffect.count(name) && name != "timeout" && name != "store_type" &&
               name != "keep_alive_max_attempt") {
      unknown.push_back(name);
    }
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& name : unknown) list += (list.empty() ? "" : ", ") + name;
    refuse(source,
           fmt::format("unknown rendezvous option{} {}: mgtrain understands join_timeout, last_call_timeout, timeout, "
                       "keep_alive_interval, keep_alive_max_attempt, close_timeout, read_timeout, is_host, use_libuv "
                       "and store_type=tcp (docs/torchrun.md)",
                       unknown.size() == 1 ? "" : "s", list));
  }
  if (auto attempts = conf.find("keep_alive_max_attempt"); attempts != conf.end()) {
    const auto count = parse_int(attempts->second);
    if (!count || *count < 1)
      refuse(source, fmt::format("keep_alive_max_attempt '{}' is not a positive integer", attempts->second));
    const double seconds = static_cast<double>(*count) * interval;
    const bool whole = seconds == static_cast<double>(static_cast<std::int64_t>(seconds));
    set("launch.node_timeout", whole ? std::to_string(static_cast<std::int64_t>(seconds)) : format_number(seconds),
        "keep_alive_max_attempt=" + attempts->second);
  }
  return settings;
}

void read_pet_variables(const EnvMap& env, const std::set<std::string>& given_keys,
                        const std::set<std::string>& given_dests, std::vector<FlagSetting>& settings,
                        TorchrunExtras& extras, bool as_torchrun) {
  for (const auto& option : kOptions) {
    if (!option.reads_pet) continue;
    const std::string name = pet_name(option);
    const auto found = env.find(name);
    if (found == env.end()) continue;
    if (option.key ? given_keys.count(option.key) > 0 : given_dests.count(option.dest) > 0) continue;  // the flag wins
    const ValueSource source{"environment " + name, fmt::format("environment {}={}", name, found->second)};
    const std::string raw = as_torchrun ? check_as_argparse(option, source, found->second, true) : found->second;
    if (option.store_true) {
      const bool on = pet_flag_value(name, raw);
      if (option.key) {
        settings.push_back({option.key, on ? "true" : "false", name, source.name, source.where});
      } else if (on) {
        option.apply(source, "1", extras);
      }
      continue;
    }
    if (option.apply) option.apply(source, raw, extras);
    if (option.key) settings.push_back({option.key, raw, name, source.name, source.where});
  }
  // torchrun's stop timeout: --shutdown-timeout, else PET_SHUTDOWN_TIMEOUT, else TORCH_ELASTIC_SHUTDOWN_TIMEOUT
  // (torch.distributed.launcher.api), else 30 s. Below the flags and PET_*, like them above the config and MGTRAIN_*
  // variables.
  const char* kShutdownTimeout = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT";
  const auto shutdown = env.find(kShutdownTimeout);
  if (shutdown != env.end() && given_keys.count("launch.grace_period") == 0 && env.count("PET_SHUTDOWN_TIMEOUT") == 0) {
    const std::string where = fmt::format("environment {}={}", kShutdownTimeout, shutdown->second);
    settings.push_back({"launch.grace_period", shutdown->second, kShutdownTimeout,
                        std::string("environment ") + kShutdownTimeout, where});
  }
}

std::vector<FlagSetting> pet_settings(const EnvMap& env) {
  std::vector<FlagSetting> settings;
  TorchrunExtras extras;
  read_pet_variables(env, {}, {}, settings, extras);
  settings.insert(settings.begin(), extras.settings.begin(), extras.settings.end());
  return settings;
}

namespace {

std::string describe_one(const TorchrunOption& option, const std::string& name, const std::string& value) {
  std::vector<FlagSetting> settings;
  TorchrunExtras extras;
  try {
    read_pet_variables({{name, value}}, {}, {}, settings, extras);
  } catch (const UsageError& e) {
    return std::string("refused: ") + e.what();
  }
  settings.insert(settings.begin(), extras.settings.begin(), extras.settings.end());
  std::string effect;
  for (const auto& setting : settings) effect += (effect.empty() ? "" : ", ") + setting.key + " = " + setting.value;
  if (extras.module) effect = "the program is a Python module (-m)";
  if (extras.no_python) effect = "the program runs itself (--no-python)";
  if (extras.run_path) effect = "the program runs under launch.python (--run-path)";
  if (extras.log_line_prefix_template)
    effect = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE = " + *extras.log_line_prefix_template;
  if (extras.duplicate_stdout_filters || extras.duplicate_stderr_filters) effect = option.help;
  if (!effect.empty()) return effect;
  if (option.store_true) return "off";
  return option.help;
}

}  // namespace

}  // namespace mgtrain::cli_detail

namespace mgtrain {

std::vector<TorchrunVariable> describe_torchrun_variables(const EnvMap& env) {
  std::vector<TorchrunVariable> found;
  for (const auto& [name, value] : env) {
    if (!starts_with(name, "PET_")) continue;
    const cli_detail::TorchrunOption* option = nullptr;
    for (const auto& candidate : cli_detail::torchrun_options())
      if (candidate.reads_pet && cli_detail::pet_name(candidate) == name) option = &candidate;
    std::string effect = option ? cli_detail::describe_one(*option, name, value)
                                : "ignored: torchrun 2.15 has no option that reads it (mgtrain ignores it too)";
    found.push_back({name, value, effect});
  }
  return found;
}

}  // namespace mgtrain
