// Resolution of the launch settings into a LaunchPlan: the typed values (config/launch_settings.hpp, checked by the
// schema where they entered) against the host's facts, and the rules that involve several keys or the host.
// Ranges of single keys are the schema's (config_schema_keys.cpp), not repeated here.
#include "supervise/launch_plan.hpp"

#include <algorithm>
#include <csignal>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "host/gpu_selection.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

std::string plural(int count, const std::string& word) {
  return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

std::string where_gpus_come_from(const HostFacts& host) {
  return host.cuda_visible_devices_set ? "visible through CUDA_VISIBLE_DEVICES"
                                       : "found (/proc/driver/nvidia/gpus, /dev/nvidia*)";
}

// launch.gpu_ids listed: indices into the visible GPUs become what CUDA_VISIBLE_DEVICES holds for them; GPU-/MIG-
// UUIDs are used as they are. Each GPU once.
std::vector<std::string> resolve_gpu_ids(const GpuList& list, const HostFacts& host) {
  std::vector<std::string> devices;
  std::set<std::string> seen;
  const int visible = static_cast<int>(host.visible_gpus.size());
  for (const GpuId& id : list.listed) {
    if (id.is_index() && id.index >= visible) {
      throw UsageError("launch.gpu_ids: GPU " + id.text() + " does not exist: " + plural(visible, "GPU") + " " +
                       where_gpus_come_from(host) + "; list indices below that count, e.g. --gpu-ids 0,1");
    }
    const std::string device = id.is_index() ? host.visible_gpus[id.index] : id.uuid;
    if (!seen.insert(device).second) {
      throw UsageError("launch.gpu_ids: GPU " + device + " is listed twice in '" + list.text() +
                       "': give each worker its own GPU");
    }
    devices.push_back(device);
  }
  return devices;
}

int resolve_nproc(const NprocSpec& nproc, const std::vector<std::string>& gpus, bool gpu_ids_given,
                  const HostFacts& host, Personality personality, std::string& reason) {
  const int cpu_workers = std::max(host.cpu_count(), 1);  // `cpu`, and `auto` without a GPU in torchrun's personality
  const std::string flag = personality == Personality::Torchrun ? "--nproc-per-node" : "--nproc";  // its spelling
  switch (nproc.kind) {
    case NprocSpec::Kind::Count:
      if (gpu_ids_given && nproc.count != static_cast<int>(gpus.size())) {
        throw UsageError("launch.nproc is " + nproc.text() + " but launch.gpu_ids names " +
                         plural(static_cast<int>(gpus.size()), "GPU") + ": give one GPU per worker, or set " + flag +
                         " gpu to run one worker per listed GPU");
      }
      reason = "nproc " + nproc.text();
      return nproc.count;
    case NprocSpec::Kind::Gpu:
    case NprocSpec::Kind::Auto: {
      if (gpu_ids_given) {
        reason = nproc.text() + ": " + plural(static_cast<int>(gpus.size()), "GPU") + " in launch.gpu_ids";
        return static_cast<int>(gpus.size());
      }
      const int visible = static_cast<int>(host.visible_gpus.size());
      if (visible > 0) {
        reason = nproc.text() + ": " + plural(visible, "GPU") + " " + where_gpus_come_from(host);
        return visible;
      }
      if (nproc.kind == NprocSpec::Kind::Gpu) {
        throw UsageError("launch.nproc is 'gpu' but no NVIDIA GPU was " + where_gpus_come_from(host) + ": use " + flag +
                         " N or " + flag + " cpu on a machine without GPUs");
      }
      if (personality == Personality::Torchrun) {  // torchrun: one worker per CPU, as `cpu`
        reason = "auto: no GPU found, " + plural(cpu_workers, "CPU") + " (torchrun's rule)";
        return cpu_workers;
      }
      reason = "auto: no GPU found, 1 worker";
      return 1;
    }
    case NprocSpec::Kind::Cpu:
      break;
  }
  reason = "cpu: " + plural(host.cpu_count(), "CPU");
  return cpu_workers;
}

// A local rank named by `key` (launch.local_ranks_filter, launch.tty) must be one of this node's workers.
void check_local_rank(int rank, int nproc, const char* key) {
  if (rank < nproc) return;
  throw UsageError(std::string(key) + ": local rank " + std::to_string(rank) + " does not exist (this node runs " +
                   plural(nproc, "worker") + ", local ranks 0.." + std::to_string(nproc - 1) + ")");
}

// tee/redirect/local_ranks_filter per local rank, then torchrun's routing rule (output_routing.hpp).
std::vector<ConsoleRouting> resolve_console(const LaunchConfig& launch, int nproc) {
  std::vector<StreamSet> tees, redirects;
  std::vector<bool> shown(nproc, launch.local_ranks_filter.all());
  for (int rank : launch.local_ranks_filter.ranks) {
    check_local_rank(rank, nproc, "launch.local_ranks_filter");
    shown[rank] = true;
  }
  for (int rank = 0; rank < nproc; ++rank) {
    tees.push_back(streams_of_std(launch.tee.mode_of(rank)));
    redirects.push_back(streams_of_std(launch.redirect.mode_of(rank)));
  }
  return resolve_console_routing(tees, redirects, shown);
}

TtyChoice resolve_tty(const TtySpec& tty, int nproc) {
  switch (tty.kind) {
    case TtySpec::Kind::Auto:
      return TtyChoice{TtyMode::Auto, 0};
    case TtySpec::Kind::On:
      return TtyChoice{TtyMode::On, 0};
    case TtySpec::Kind::Off:
      return TtyChoice{TtyMode::Off, 0};
    case TtySpec::Kind::Rank:
      break;
  }
  check_local_rank(tty.rank, nproc, "launch.tty");
  return TtyChoice{TtyMode::On, tty.rank};
}

// launch.gpu_ids auto: as many GPUs as workers (all visible ones for nproc auto|gpu, and for dp), the ones with the
// most free memory. No visible GPU: none, and the note says so.
std::vector<std::string> choose_auto_gpus(const NprocSpec& nproc, const HostFacts& host, bool data_parallel,
                                          std::string& note) {
  const int visible = static_cast<int>(host.visible_gpus.size());
  if (visible == 0) {
    note = "mgtrain: --gpu-ids auto: no GPU " + where_gpus_come_from(host) + "; the workers get none";
    return {};
  }
  int count = visible;
  if (!data_parallel && nproc.is_count()) {
    count = nproc.count;
  } else if (!data_parallel && nproc.kind == NprocSpec::Kind::Cpu) {
    throw UsageError("launch.gpu_ids auto picks one GPU per worker, but launch.nproc is '" + nproc.text() +
                     "': use --nproc N, gpu or auto with it");
  }
  std::vector<GpuSample> samples;
  if (host.gpu_stats) samples = host.gpu_stats();
  GpuSelection selection = select_gpus_by_free_memory(count, host.visible_gpus, samples);
  note = selection.note;
  return selection.devices;
}

// launch.virtual_local_rank without gpu_ids, as torch 2.15's agent: local rank i gets the i-th entry of the launcher's
// CUDA_VISIBLE_DEVICES (refused when it has fewer), else GPU i.
std::vector<std::string> virtual_rank_gpus(int nproc, const HostFacts& host) {
  std::vector<std::string> gpus;
  if (!host.cuda_visible_devices_set) {
    for (int local_rank = 0; local_rank < nproc; ++local_rank) gpus.push_back(std::to_string(local_rank));
    return gpus;
  }
  for (const std::string& entry : split(host.cuda_visible_devices, ',')) gpus.push_back(trim(entry));
  if (static_cast<int>(gpus.size()) < nproc) {
    throw UsageError("launch.virtual_local_rank gives each worker one entry of CUDA_VISIBLE_DEVICES=" +
                     host.cuda_visible_devices + ", which has " + std::to_string(gpus.size()) + " for " +
                     plural(nproc, "worker") + ": list one GPU per worker, or start fewer (--nproc)");
  }
  gpus.resize(static_cast<std::size_t>(nproc));
  return gpus;
}

}  // namespace

int ranks_on_console(const std::vector<ConsoleRouting>& console) {
  return static_cast<int>(std::count_if(console.begin(), console.end(), [](const ConsoleRouting& routing) {
    return routing.stdout_to_console || routing.stderr_to_console;
  }));
}

bool console_dedup_on(ConsoleDedupMode mode, Personality personality, const std::vector<ConsoleRouting>& console) {
  if (mode != ConsoleDedupMode::Auto) return mode == ConsoleDedupMode::On;
  return personality == Personality::Mgtrain && ranks_on_console(console) >= kConsoleDedupAutoRanks;
}

LaunchPlan make_launch_plan(const LaunchConfig& launch, const std::vector<std::string>& command, const HostFacts& host,
                            Strategy strategy, Personality personality) {
  if (command.empty()) throw UsageError("launch: no command to run: give one after `--`, or a config for the trainer");
  LaunchPlan plan;
  plan.command = command;
  plan.hostname = host.hostname;
  plan.personality = personality;
  plan.handled_signals = launch.signals_to_handle.signals;

  bool gpu_ids_given = launch.gpu_ids.kind == GpuList::Kind::Listed;
  const bool data_parallel = strategy == Strategy::Dp;
  std::vector<std::string> gpus;
  if (launch.gpu_ids.kind == GpuList::Kind::Auto) {
    gpus = choose_auto_gpus(launch.nproc, host, data_parallel, plan.gpu_note);
    gpu_ids_given = !gpus.empty();
  } else if (gpu_ids_given) {
    gpus = resolve_gpu_ids(launch.gpu_ids, host);
  }
  if (data_parallel) {  // one process; CUDA_VISIBLE_DEVICES holds every selected GPU
    if (launch.nproc.is_count() && launch.nproc.count != 1) {
      throw UsageError("ddp.strategy dp runs one process over all selected GPUs, but launch.nproc is " +
                       launch.nproc.text() + ": use --nproc 1 (or auto), or ddp.strategy: ddp for one process per GPU");
    }
    plan.nproc = 1;
    const int gpu_count = gpu_ids_given ? static_cast<int>(gpus.size()) : static_cast<int>(host.visible_gpus.size());
    plan.nproc_reason = "ddp.strategy dp: 1 process over " + plural(gpu_count, "GPU");
    if (gpu_ids_given) plan.gpu_for_local_rank = {fmt::format("{}", fmt::join(gpus, ","))};
  } else {
    plan.nproc = resolve_nproc(launch.nproc, gpus, gpu_ids_given, host, personality, plan.nproc_reason);
    if (gpu_ids_given) plan.gpu_for_local_rank = gpus;
    if (launch.virtual_local_rank && !gpu_ids_given) plan.gpu_for_local_rank = virtual_rank_gpus(plan.nproc, host);
    plan.virtual_local_rank = launch.virtual_local_rank;
  }

  plan.min_nodes = launch.nnodes.min;
  plan.max_nodes = launch.nnodes.max;
  plan.nnodes = plan.max_nodes;
  // --standalone is torchrun's single-node shortcut: it overrides any rendezvous settings.
  const RdzvEndpoint& endpoint = launch.rdzv_endpoint;
  const bool endpoint_given = !launch.standalone && !endpoint.empty();
  // HOST:0 is torchrun's recipe for several single-node jobs on one host: the job runs on a free port of its own.
  const bool free_port_endpoint = endpoint_given && endpoint.port_or_default() == 0;
  if (free_port_endpoint && plan.max_nodes != 1) {
    throw UsageError(
        "launch.rdzv_endpoint '" + endpoint.text() +
        "' asks for a free port (:0), which only a single node can use, but launch.nnodes is " + launch.nnodes.text() +
        ": give the other nodes a fixed port to meet at, e.g. --rdzv-endpoint node0:29400, or use --nnodes 1");
  }
  plan.dynamic = endpoint_given && !free_port_endpoint && launch.rdzv_backend == RdzvBackend::C10d;
  if (plan.min_nodes != plan.max_nodes && !plan.dynamic) {
    throw UsageError(
        "launch.nnodes " + launch.nnodes.text() +
        " is a range: elastic jobs need the dynamic rendezvous, "
        "--rdzv-endpoint HOST:PORT (with --rdzv-backend c10d, the default); or give a fixed count, e.g. --nnodes " +
        std::to_string(plan.max_nodes));
  }
  if (launch.standalone && plan.nnodes != 1) {
    throw UsageError("launch.standalone runs a single node, but launch.nnodes is " + launch.nnodes.text() +
                     ": drop --standalone, or use --nnodes 1");
  }
  if (!plan.dynamic && (launch.node_rank < 0 || launch.node_rank >= plan.nnodes)) {
    throw UsageError("launch.node_rank " + std::to_string(launch.node_rank) + " is outside 0.." +
                     std::to_string(plan.nnodes - 1) + " (launch.nnodes is " + launch.nnodes.text() + ")");
  }
  if (data_parallel && plan.max_nodes > 1) {
    throw UsageError("ddp.strategy dp runs on one node, but launch.nnodes is " + launch.nnodes.text() +
                     ": use ddp.strategy: ddp across nodes");
  }
  plan.node_rank = plan.dynamic ? 0 : static_cast<int>(launch.node_rank);  // dynamic: assigned by the rendezvous
  plan.world_size = plan.nnodes * plan.nproc;

  if (launch.master_addr.empty())
    throw UsageError("launch.master_addr is empty: give the address of node 0, e.g. 127.0.0.1");
  plan.master_addr = launch.master_addr;
  plan.master_port = static_cast<int>(launch.master_port);
  if (endpoint_given && !plan.dynamic) {  // static, or HOST:0 on one node: the endpoint is node 0's address and port
    plan.master_addr = endpoint.host;
    plan.master_port = endpoint.port_or_default();
  }
  if (plan.picks_port() && plan.nnodes > 1 && !plan.dynamic) {
    throw UsageError("launch.master_port 0 (pick a free port) works on one node only: with --nnodes " +
                     launch.nnodes.text() +
                     " every node must know the port of node 0's rendezvous; pass the same --master-port to all nodes");
  }
  if (plan.dynamic) {
    plan.rdzv_host = endpoint.host;
    plan.rdzv_port = endpoint.port_or_default();
    plan.master_addr = plan.rdzv_host;  // the workers' store runs on the endpoint's host (node rank 0)
  } else {
    plan.rdzv_host = plan.master_addr;
    plan.rdzv_port = plan.master_port;
  }
  plan.join_timeout_s = launch.join_timeout;
  plan.last_call_timeout_s = launch.last_call_timeout;
  plan.node_timeout_s = launch.node_timeout;
  plan.node_heartbeat_interval_s = std::min(launch.node_heartbeat_interval, launch.node_timeout / 3);
  plan.allow_uneven_nproc = launch.allow_uneven_nproc;
  plan.exit_with_stdin = launch.exit_with_stdin;

  plan.max_restarts = static_cast<int>(launch.max_restarts);
  plan.grace_period_s = launch.grace_period;
  plan.threads_per_worker = static_cast<int>(launch.threads_per_worker);
  plan.cpus = host.cpus;
  plan.hang_timeout_s = launch.hang_timeout;
  plan.diagnose_timeout_s = launch.diagnose_timeout;
  plan.status_server = launch.status_port > 0;

  if (launch.run_id.empty() || launch.run_id == "." || launch.run_id == ".." ||
      launch.run_id.find('/') != std::string::npos) {
    throw UsageError("launch.run_id '" + launch.run_id +
                     "' cannot name a directory: use letters, digits, '-', '_' or '.', without '/'");
  }
  plan.run_id = launch.run_id;
  plan.role = launch.role;
  if (launch.log_dir.empty()) throw UsageError("launch.log_dir is empty: give a directory for logs, e.g. runs");
  std::string log_dir = launch.log_dir;
  if (log_dir.front() != '/') log_dir = host.cwd + (host.cwd.empty() || host.cwd.back() == '/' ? "" : "/") + log_dir;
  while (log_dir.size() > 1 && log_dir.back() == '/') log_dir.pop_back();
  plan.run_dir = log_dir + "/" + plan.run_id;

  plan.console = resolve_console(launch, plan.nproc);
  plan.console_dedup = console_dedup_on(launch.console_dedup, personality, plan.console);
  plan.tty = resolve_tty(launch.tty, plan.nproc);
  return plan;
}

}  // namespace mgtrain
