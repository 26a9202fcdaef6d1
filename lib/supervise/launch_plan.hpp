// Turns the `launch:` settings into a checked, fully resolved plan for this node: how many workers,
// their ranks, port, console routing and GPUs. Pure: facts about the host come in as HostFacts. The settings
// arrive as typed values the config schema parsed once (config/launch_settings.hpp); the plan only resolves them.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/config_request.hpp"
#include "config/launch_defaults.hpp"
#include "host/cpu_allowance.hpp"
#include "host/nvml_library.hpp"
#include "output/line_prefix.hpp"
#include "output/output_routing.hpp"

namespace mgtrain {

// What the plan needs to know about the machine (probe_host_facts in host_probe.hpp gathers it).
struct HostFacts {
  std::vector<std::string> visible_gpus;  // what CUDA would enumerate, after CUDA_VISIBLE_DEVICES
  bool cuda_visible_devices_set = false;
  std::string cuda_visible_devices;  // the variable as the launcher got it (when set)
  CpuAllowance cpus;  // the CPUs this process may run on (affinity mask), the cgroup's quota, who shares them
  int cpu_count() const { return std::max(static_cast<int>(cpus.affinity.size()), 1); }
  std::string hostname;
  std::string cwd;  // absolute; relative log_dir is resolved against it
  // Per-GPU statistics for `--gpu-ids auto` (NVML); called only then. Unset or empty result: no statistics.
  std::function<std::vector<GpuSample>()> gpu_stats;
};

struct LaunchPlan {
  int nproc = 1;       // workers on this node (LOCAL_WORLD_SIZE)
  int nnodes = 1;      // GROUP_WORLD_SIZE
  int node_rank = 0;   // GROUP_RANK
  int world_size = 1;  // nnodes * nproc
  std::string master_addr;
  int master_port = 0;  // 0: a free port is picked for every attempt
  int max_restarts = 0;
  std::string run_id;
  std::string role = launch_defaults::kRole;  // ROLE_NAME (launch.role, torchrun's --role)
  std::string run_dir;                        // absolute <log_dir>/<run_id>
  double grace_period_s = launch_defaults::kGracePeriodS;
  double hang_timeout_s = 0.0;                                     // 0: no hang detection (launch.hang_timeout)
  double diagnose_timeout_s = launch_defaults::kDiagnoseTimeoutS;  // diagnostics of a hang before the stop
  bool status_server = false;           // the status API reads the workers' heartbeat files (launch.status_port)
  std::vector<ConsoleRouting> console;  // per local rank
  bool console_dedup = false;           // identical lines of several ranks shown once (console_dedup_on)
  TtyChoice tty;                        // which worker writes to a pseudo-terminal (launch.tty)
  std::vector<std::string> gpu_for_local_rank;  // per local rank; empty: CUDA_VISIBLE_DEVICES untouched
  bool virtual_local_rank = false;              // every worker's LOCAL_RANK is 0 (launch.virtual_local_rank)
  std::vector<std::string> command;             // argv; "${local_rank}" is replaced per worker
  bool builtin_trainer = false;                 // `command` is the trainer, run with the config file (worker_command)
  std::string hostname;
  Personality personality = Personality::Mgtrain;  // torchrun's console, exit codes and signals (docs/torchrun.md)
  // The torchrun personality's --signals-to-handle (launch.signals_to_handle): the signals that stop the job as
  // torchrun's handler does; any other signal the launcher receives stops the workers and then kills the launcher
  // (supervision_policy.hpp, signal_response). Unused by `mgtrain launch`.
  std::vector<int> handled_signals;
  std::string nproc_reason;  // how nproc was chosen, e.g. "auto: 2 visible GPUs"
  // Each worker's OpenMP threads (worker_env.hpp, choose_worker_threads): launch.threads_per_worker (0: auto, the
  // CPUs this launcher may use divided among the workers that share them), the CPUs, and how many workers share them:
  // 0 means this node's nproc; a node agent sets it per round, counting the workers of the nodes on the same CPUs.
  int threads_per_worker = 0;
  CpuAllowance cpus;
  int workers_sharing_cpus = 0;
  std::string gpu_note;  // `--gpu-ids auto` or ddp.strategy dp: what was chosen (printed)

  // Multi-node (node_agent.cpp; set per round by the agent from the rendezvous).
  int first_rank = -1;       // global rank of local rank 0; -1: node_rank * nproc
  int role_first_rank = -1;  // ROLE_RANK of local rank 0 (ranks numbered per role, as torchrun); -1: the global rank
  int role_world_size = -1;  // ROLE_WORLD_SIZE: the workers of this node's role on every node; -1: world_size
  int restart_count = -1;    // the round's TORCHELASTIC_RESTART_COUNT (restarts after failures; an elastic
                             // scale-up starts a round without one, as in torchrun); -1: the attempt number
  bool dynamic = false;      // node ranks assigned on arrival (rdzv_endpoint with c10d)
  int min_nodes = 1;         // nnodes MIN:MAX (static: both nnodes)
  int max_nodes = 1;
  std::string rdzv_host;  // where the rendezvous server listens: static master_addr, dynamic the endpoint
  int rdzv_port = 0;
  double join_timeout_s = launch_defaults::kJoinTimeoutS;
  double last_call_timeout_s = launch_defaults::kLastCallTimeoutS;
  double node_timeout_s = launch_defaults::kNodeTimeoutS;
  double node_heartbeat_interval_s = launch_defaults::kNodeHeartbeatIntervalS;  // already capped at node_timeout_s / 3
  bool allow_uneven_nproc = false;
  bool exit_with_stdin = false;

  // The console's prefix of worker lines (mgtrain's, or torch's template: --log-line-prefix-template, else
  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) and torchrun's duplicate filters of stdout and stderr
  // (--duplicate-*-filters, else PET_DUPLICATE_*_FILTERS; none: no filtered file), read once (launch.cpp). Values:
  // the workers' environment stays the launcher's, as under torchrun.
  LinePrefix line_prefix;
  std::optional<std::vector<std::string>> duplicate_filters[2];
  // The file timer (torch.distributed.elastic.timer.FileTimerServer, file_timer_table.hpp): the named pipe the
  // workers' FileTimerClient writes to (TORCHELASTIC_TIMER_FILE); empty: no file timer.
  std::string timer_file;
  // `launch script.py` / `-m`: the interpreter that runs it (resolved path) and where that choice came from,
  // for the failure report's hint when the program cannot import torch. Empty for other commands.
  std::string python;
  std::string python_source;

  bool picks_port() const { return master_port == 0; }
  // Whether node agents meet through the rendezvous (more than one node, or dynamic).
  bool multi_node() const { return dynamic || max_nodes > 1; }
  int global_rank(int local_rank) const { return (first_rank >= 0 ? first_rank : node_rank * nproc) + local_rank; }
  int role_rank(int local_rank) const {
    return role_first_rank >= 0 ? role_first_rank + local_rank : global_rank(local_rank);
  }
  int role_size() const { return role_world_size >= 0 ? role_world_size : world_size; }
};

// launch.console_dedup: on or off as set; auto: on in mgtrain's personality when at least kConsoleDedupAutoRanks of
// the node's ranks print to the console.
inline constexpr int kConsoleDedupAutoRanks = 4;
// How many local ranks print to the console (stdout or stderr): the ranks a deduplicated line waits for.
int ranks_on_console(const std::vector<ConsoleRouting>& console);
bool console_dedup_on(ConsoleDedupMode mode, Personality personality, const std::vector<ConsoleRouting>& console);

// Resolves nproc, gpu_ids, nnodes, tee/redirect/filter, tty and paths against the host, and checks what involves
// several settings or the host (a GPU index beyond the visible ones, a local rank beyond nproc, node_rank against
// nnodes, ...). `command` is the worker's argv (non-empty). Throws UsageError naming the setting and the fix.
// launch.gpu_ids auto: the nproc GPUs with the most free memory (host.gpu_stats; see gpu_selection.hpp).
// `strategy` is ddp.strategy: dp starts one worker that sees every selected GPU (nproc 1, one node).
// `personality` Torchrun: nproc auto without a GPU is one worker per CPU (torch._utils.cpu_count(), the affinity
// count), as torchrun's determine_local_world_size; handled_signals come from launch.signals_to_handle.
LaunchPlan make_launch_plan(const LaunchConfig& launch, const std::vector<std::string>& command, const HostFacts& host,
                            Strategy strategy = Strategy::Ddp, Personality personality = Personality::Mgtrain);

}  // namespace mgtrain
