// Validation and resolution of the launch settings into a LaunchPlan.
#include "supervise/launch_plan.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include "util/error.hpp"
#include "util/value_parsing.hpp"
#include "host/gpu_selection.hpp"

namespace mgtrain {
namespace {

// A count written as 1 to 6 digits, above zero (a worker count, node count, GPU index or port).
std::optional<int> positive_count(const std::string& text) {
  const std::optional<std::uint64_t> value = parse_digits(text, 6);
  if (!value || *value == 0) return std::nullopt;
  return static_cast<int>(*value);
}

std::string plural(int count, const std::string& word) {
  return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

std::string where_gpus_come_from(const HostFacts& host) {
  return host.cuda_visible_devices_set ? "visible through CUDA_VISIBLE_DEVICES"
                                       : "found (/proc/driver/nvidia/gpus, /dev/nvidia*)";
}

// launch.gpu_ids "0,2": indices into the visible GPUs, or GPU-/MIG- UUIDs used as they are.
std::vector<std::string> resolve_gpu_ids(const std::string& text, const HostFacts& host) {
  std::vector<std::string> devices;
  std::set<std::string> seen;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string entry = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    const std::optional<int> positive = positive_count(entry);
    if (entry == "0" || positive) {
      const int index = positive.value_or(0);
      if (index >= static_cast<int>(host.visible_gpus.size())) {
        throw UsageError("launch.gpu_ids: GPU " + entry + " does not exist: " +
                         plural(static_cast<int>(host.visible_gpus.size()), "GPU") + " " +
                         where_gpus_come_from(host) + "; list indices below that count, e.g. --gpu-ids 0,1");
      }
      entry = host.visible_gpus[index];
    } else if (entry.rfind("GPU-", 0) != 0 && entry.rfind("MIG-", 0) != 0) {
      throw UsageError("launch.gpu_ids: '" + entry + "' in '" + text +
                       "' is not a GPU: write comma-separated indices (0,2) or GPU-/MIG- UUIDs");
    }
    if (!seen.insert(entry).second) {
      throw UsageError("launch.gpu_ids: GPU " + entry + " is listed twice in '" + text + "': give each worker its own GPU");
    }
    devices.push_back(entry);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return devices;
}

int resolve_nproc(const std::string& nproc, const std::vector<std::string>& gpus, bool gpu_ids_given,
                  const HostFacts& host, std::string& reason) {
  if (const std::optional<int> count = positive_count(nproc)) {
    if (gpu_ids_given && *count != static_cast<int>(gpus.size())) {
      throw UsageError("launch.nproc is " + nproc + " but launch.gpu_ids names " +
                       plural(static_cast<int>(gpus.size()), "GPU") +
                       ": give one GPU per worker, or set --nproc gpu to run one worker per listed GPU");
    }
    reason = "nproc " + nproc;
    return *count;
  }
  if (nproc == "gpu" || nproc == "auto") {
    if (gpu_ids_given) {
      reason = nproc + ": " + plural(static_cast<int>(gpus.size()), "GPU") + " in launch.gpu_ids";
      return static_cast<int>(gpus.size());
    }
    int visible = static_cast<int>(host.visible_gpus.size());
    if (visible > 0) {
      reason = nproc + ": " + plural(visible, "GPU") + " " + where_gpus_come_from(host);
      return visible;
    }
    if (nproc == "gpu") {
      throw UsageError("launch.nproc is 'gpu' but no NVIDIA GPU was " + where_gpus_come_from(host) +
                       ": use --nproc N or --nproc cpu on a machine without GPUs");
    }
    reason = "auto: no GPU found, 1 worker";
    return 1;
  }
  if (nproc == "cpu") {
    reason = "cpu: " + plural(host.cpu_count, "CPU");
    return host.cpu_count > 0 ? host.cpu_count : 1;
  }
  throw UsageError("launch.nproc: '" + nproc + "' is not a worker count: use a positive number, auto, gpu or cpu");
}

// "N" or "MIN:MAX".
std::pair<int, int> resolve_nnodes(const std::string& text) {
  if (const std::optional<int> count = positive_count(text)) return {*count, *count};
  std::size_t colon = text.find(':');
  if (colon != std::string::npos) {
    const std::optional<int> low = positive_count(text.substr(0, colon));
    const std::optional<int> high = positive_count(text.substr(colon + 1));
    if (low && high && *low <= *high) return {*low, *high};
  }
  throw UsageError("launch.nnodes: '" + text + "' is not a node count: use a positive number such as 2, or MIN:MAX");
}

// "host", "host:port", "[v6]:port" -> host and port (default_port when absent; 0 when written as 0: a free port).
std::pair<std::string, int> split_endpoint(const std::string& text, int default_port) {
  std::string host = text, port;
  if (!text.empty() && text.front() == '[') {
    std::size_t close = text.find(']');
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) port = text.substr(close + 2);
  } else if (std::size_t colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  const std::optional<int> given = port.empty() ? std::optional<int>(default_port) : port == "0" ? 0 : positive_count(port);
  if (!given || *given > 65535) {
    throw UsageError("launch.rdzv_endpoint '" + text + "' has no valid port: write HOST:PORT, e.g. node0:29400");
  }
  if (host.empty()) throw UsageError("launch.rdzv_endpoint '" + text + "' has no host: write HOST:PORT, e.g. node0:29400");
  return {host, *given};
}

constexpr int kDefaultRendezvousPort = 29400;  // torchrun's c10d default

// launch.gpu_ids auto: as many GPUs as workers (all visible ones for nproc auto|gpu, and for dp), the ones with the
// most free memory. No visible GPU: none, and the note says so.
std::vector<std::string> choose_auto_gpus(const std::string& nproc, const HostFacts& host, bool data_parallel, std::string& note) {
  const int visible = static_cast<int>(host.visible_gpus.size());
  if (visible == 0) {
    note = "mgtrain: --gpu-ids auto: no GPU " + where_gpus_come_from(host) + "; the workers get none";
    return {};
  }
  int count = visible;
  const std::optional<int> workers = data_parallel ? std::nullopt : positive_count(nproc);
  if (workers) {
    count = *workers;
  } else if (!data_parallel && nproc != "auto" && nproc != "gpu") {
    throw UsageError("launch.gpu_ids auto picks one GPU per worker, but launch.nproc is '" + nproc +
                     "': use --nproc N, gpu or auto with it");
  }
  std::vector<GpuSample> samples;
  if (host.gpu_stats) samples = host.gpu_stats();
  GpuSelection selection = select_gpus_by_free_memory(count, host.visible_gpus, samples);
  note = selection.note;
  return selection.devices;
}

std::string join_with_commas(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

}  // namespace

LaunchPlan make_launch_plan(const LaunchConfig& launch, const std::vector<std::string>& command,
                            const HostFacts& host, Strategy strategy) {
  if (command.empty()) throw UsageError("launch: no command to run: give one after `--`, or a config for the trainer");
  LaunchPlan plan;
  plan.command = command;
  plan.hostname = host.hostname;

  bool gpu_ids_given = launch.gpu_ids.find_first_not_of(" \t") != std::string::npos;
  const bool data_parallel = strategy == Strategy::Dp;
  std::vector<std::string> gpus;
  if (trim(launch.gpu_ids) == "auto") {
    gpus = choose_auto_gpus(launch.nproc, host, data_parallel, plan.gpu_note);
    gpu_ids_given = !gpus.empty();
  } else if (gpu_ids_given) {
    gpus = resolve_gpu_ids(launch.gpu_ids, host);
  }
  if (data_parallel) {  // one process; CUDA_VISIBLE_DEVICES holds every selected GPU
    const std::optional<int> count = positive_count(launch.nproc);
    if (count && *count != 1) {
      throw UsageError("ddp.strategy dp runs one process over all selected GPUs, but launch.nproc is " + launch.nproc +
                       ": use --nproc 1 (or auto), or ddp.strategy: ddp for one process per GPU");
    }
    plan.nproc = 1;
    const int gpu_count = gpu_ids_given ? static_cast<int>(gpus.size()) : static_cast<int>(host.visible_gpus.size());
    plan.nproc_reason = "ddp.strategy dp: 1 process over " + plural(gpu_count, "GPU");
    if (gpu_ids_given) plan.gpu_for_local_rank = {join_with_commas(gpus)};
  } else {
    plan.nproc = resolve_nproc(launch.nproc, gpus, gpu_ids_given, host, plan.nproc_reason);
    if (gpu_ids_given) plan.gpu_for_local_rank = gpus;
  }

  std::tie(plan.min_nodes, plan.max_nodes) = resolve_nnodes(launch.nnodes);
  plan.nnodes = plan.max_nodes;
  // --standalone is torchrun's single-node shortcut: it overrides any rendezvous settings.
  const bool endpoint_given = !launch.standalone && launch.rdzv_endpoint.find_first_not_of(" \t") != std::string::npos;
  // HOST:0 is torchrun's recipe for several single-node jobs on one host: the job runs on a free port of its own.
  const bool free_port_endpoint = endpoint_given && split_endpoint(trim(launch.rdzv_endpoint), kDefaultRendezvousPort).second == 0;
  if (free_port_endpoint && plan.max_nodes != 1) {
    throw UsageError("launch.rdzv_endpoint '" + trim(launch.rdzv_endpoint) + "' asks for a free port (:0), which only a single node can use, but launch.nnodes is " +
                     launch.nnodes + ": give the other nodes a fixed port to meet at, e.g. --rdzv-endpoint node0:29400, or use --nnodes 1");
  }
  plan.dynamic = endpoint_given && !free_port_endpoint && launch.rdzv_backend == RdzvBackend::C10d;
  if (plan.min_nodes != plan.max_nodes && !plan.dynamic) {
    throw UsageError("launch.nnodes " + launch.nnodes + " is a range: elastic jobs need the dynamic rendezvous, "
                     "--rdzv-endpoint HOST:PORT (with --rdzv-backend c10d, the default); or give a fixed count, e.g. --nnodes " +
                     std::to_string(plan.max_nodes));
  }
  if (launch.standalone && plan.nnodes != 1) {
    throw UsageError("launch.standalone runs a single node, but launch.nnodes is " + launch.nnodes +
                     ": drop --standalone, or use --nnodes 1");
  }
  if (!plan.dynamic && (launch.node_rank < 0 || launch.node_rank >= plan.nnodes)) {
    throw UsageError("launch.node_rank " + std::to_string(launch.node_rank) + " is outside 0.." +
                     std::to_string(plan.nnodes - 1) + " (launch.nnodes is " + launch.nnodes + ")");
  }
  if (data_parallel && plan.max_nodes > 1) {
    throw UsageError("ddp.strategy dp runs on one node, but launch.nnodes is " + launch.nnodes + ": use ddp.strategy: ddp across nodes");
  }
  plan.node_rank = plan.dynamic ? 0 : static_cast<int>(launch.node_rank);  // dynamic: assigned by the rendezvous
  plan.world_size = plan.nnodes * plan.nproc;

  if (launch.master_addr.empty()) throw UsageError("launch.master_addr is empty: give the address of node 0, e.g. 127.0.0.1");
  plan.master_addr = launch.master_addr;
  if (launch.master_port < 0 || launch.master_port > 65535) {
    throw UsageError("launch.master_port " + std::to_string(launch.master_port) +
                     " is not a TCP port: use 1..65535, or 0 to pick a free one");
  }
  plan.master_port = static_cast<int>(launch.master_port);
  if (endpoint_given && !plan.dynamic) {  // static, or HOST:0 on one node: the endpoint is node 0's address and port
    std::tie(plan.master_addr, plan.master_port) = split_endpoint(trim(launch.rdzv_endpoint), kDefaultRendezvousPort);
  }
  if (plan.picks_port() && plan.nnodes > 1 && !plan.dynamic) {
    throw UsageError("launch.master_port 0 (pick a free port) works on one node only: with --nnodes " + launch.nnodes +
                     " every node must know the port of node 0's rendezvous; pass the same --master-port to all nodes");
  }
  if (plan.dynamic) {
    std::tie(plan.rdzv_host, plan.rdzv_port) = split_endpoint(trim(launch.rdzv_endpoint), kDefaultRendezvousPort);
    plan.master_addr = plan.rdzv_host;  // the workers' store runs on the endpoint's host (node rank 0)
  } else {
    plan.rdzv_host = plan.master_addr;
    plan.rdzv_port = plan.master_port;
  }
  plan.join_timeout_s = launch.join_timeout;
  plan.last_call_timeout_s = launch.last_call_timeout;
  plan.node_timeout_s = launch.node_timeout;
  if (!(plan.join_timeout_s > 0) || !(plan.node_timeout_s > 0) || !(launch.node_heartbeat_interval > 0)) {
    throw UsageError("launch.join_timeout, launch.node_timeout and launch.node_heartbeat_interval must be more than 0 seconds");
  }
  plan.node_heartbeat_interval_s = std::min(launch.node_heartbeat_interval, launch.node_timeout / 3);
  plan.allow_uneven_nproc = launch.allow_uneven_nproc;
  plan.exit_with_stdin = launch.exit_with_stdin;

  if (launch.max_restarts < 0) throw UsageError("launch.max_restarts must be 0 or more, not " + std::to_string(launch.max_restarts));
  plan.max_restarts = static_cast<int>(launch.max_restarts);
  if (!(launch.grace_period >= 0)) throw UsageError("launch.grace_period must be 0 or more seconds");
  plan.grace_period_s = launch.grace_period;
  if (!(launch.heartbeat_timeout >= 0)) throw UsageError("launch.heartbeat_timeout must be 0 (off) or more seconds");
  plan.heartbeat_timeout_s = launch.heartbeat_timeout;
  plan.status_server = launch.status_port > 0;

  if (launch.run_id.empty() || launch.run_id == "." || launch.run_id == ".." ||
      launch.run_id.find('/') != std::string::npos) {
    throw UsageError("launch.run_id '" + launch.run_id +
                     "' cannot name a directory: use letters, digits, '-', '_' or '.', without '/'");
  }
  plan.run_id = launch.run_id;
  if (launch.role.empty()) throw UsageError("launch.role is empty: give the workers' role name (ROLE_NAME), e.g. default");
  plan.role = launch.role;
  if (launch.log_dir.empty()) throw UsageError("launch.log_dir is empty: give a directory for logs, e.g. runs");
  std::string log_dir = launch.log_dir;
  if (log_dir.front() != '/') log_dir = host.cwd + (host.cwd.empty() || host.cwd.back() == '/' ? "" : "/") + log_dir;
  while (log_dir.size() > 1 && log_dir.back() == '/') log_dir.pop_back();
  plan.run_dir = log_dir + "/" + plan.run_id;

  plan.console = resolve_console_routing(launch.tee, launch.redirect, launch.local_ranks_filter, plan.nproc);
  plan.tty = parse_tty_choice(launch.tty, plan.nproc);
  return plan;
}

}  // namespace mgtrain
