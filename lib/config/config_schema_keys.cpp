// The config schema table: one entry per key, bound to its Config member (see config_schema.hpp), one
// function per section in documentation order, and the custom checks some keys use. The launch settings with a
// grammar of their own (nproc, nnodes, gpu_ids, tee, redirect, local_ranks_filter, tty, rdzv_endpoint, hosts) are
// typed values whose one parser is in launch_settings.cpp. The machinery (ValueType, Key, SchemaBuilder) is in
// schema_builder.hpp.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/launch_settings.hpp"
#include "config/schema_builder.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain::schema_detail {
namespace {

// ---- custom checks -------------------------------------------------------------------------

// A name without blanks (launch.role, launch.local_addr); `empty_ok` allows "".
std::optional<std::string> check_plain_word(const std::string& v, bool empty_ok) {
  if (v.empty()) return empty_ok ? std::nullopt : std::optional<std::string>("it is empty");
  if (v.find_first_of(" \t\n") != std::string::npos) return fmt::format("'{}' contains blanks", v);
  return std::nullopt;
}

// An address (launch.master_addr, local_addr, status_bind) as a host name or IP address: an IPv6 address may be
// written in brackets as in HOST:PORT ("[::1]"), and is stored without them ("::1": what MASTER_ADDR, torch's
// TCPStore and getaddrinfo take).
std::string without_brackets(std::string v) {
  if (v.size() >= 2 && v.front() == '[' && v.back() == ']') return v.substr(1, v.size() - 2);
  return v;
}

// The address itself as launch_settings' host_name_problem has it (empty: the key's default meaning).
std::optional<std::string> check_address(const std::string& v) {
  if (auto problem = check_plain_word(v, true)) return problem;
  if (v.find_first_of("[]") != std::string::npos)
    return fmt::format("'{}' has a bracket that does not enclose the whole address", v);
  if (v.empty()) return std::nullopt;
  if (auto problem = host_name_problem(v)) return fmt::format("'{}' is not a valid host: {}", v, *problem);
  return std::nullopt;
}
constexpr const char* kAddressRule = "a host name or IP address; IPv6 bare or in brackets ([::1])";

std::optional<std::string> check_remote_shell(const std::string& v) {
  if (v.find("{host}") == std::string::npos) return fmt::format("'{}' does not contain {{host}}", v);
  return std::nullopt;
}

// ---- the keys, one function per section ----------------------------------------------------

// launch: how workers are spawned and supervised; each key is also a `mgtrain launch` flag (cli_launch.cpp).
void add_launch_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(key("launch.nproc", &C::launch, &LaunchConfig::nproc,
            "worker processes on this node: a number, 'gpu' (one per visible GPU), 'cpu' (one per core) or 'auto' (gpu "
            "if any, else 1)"));
  s.add(key("launch.nnodes", &C::launch, &LaunchConfig::nnodes, "number of nodes, or MIN:MAX for an elastic job"));
  s.add(key("launch.node_rank", &C::launch, &LaunchConfig::node_rank, "rank of this node, 0 .. nnodes-1").at_least(0));
  s.add(key("launch.master_addr", &C::launch, &LaunchConfig::master_addr,
            "address of the node that hosts rank 0 (MASTER_ADDR)")
            .normalized(without_brackets)
            .must(kAddressRule, check_address));
  s.add(key("launch.master_port", &C::launch, &LaunchConfig::master_port,
            "port of rank 0's store (MASTER_PORT); 0 picks a free port on a single node")
            .range(0, 65535));
  s.add(key("launch.max_restarts", &C::launch, &LaunchConfig::max_restarts,
            "how many times the worker group is restarted after a failure")
            .at_least(0));
  s.add(
      key("launch.run_id", &C::launch, &LaunchConfig::run_id,
          "name of this run (TORCHELASTIC_RUN_ID, log and checkpoint directory); empty: date-time plus random suffix"));
  s.add(key("launch.log_dir", &C::launch, &LaunchConfig::log_dir,
            "directory that holds one sub-directory per run: logs, resolved config, failure report"));
  s.add(key("launch.tee", &C::launch, &LaunchConfig::tee,
            "torchrun's --tee: streams shown on the console and written to files (0 none, 1 stdout, 2 stderr, 3 both; "
            "or rank:mode,...)"));
  s.add(key("launch.redirect", &C::launch, &LaunchConfig::redirect,
            "torchrun's --redirects: streams written to files only, kept off the console (same values as tee)"));
  s.add(key("launch.local_ranks_filter", &C::launch, &LaunchConfig::local_ranks_filter,
            "comma-separated local ranks whose output reaches the console; empty: all (files always get every rank)"));
  s.add(key(
      "launch.tty", &C::launch, &LaunchConfig::tty,
      "give one worker a pseudo-terminal for stdout and stderr, so isatty() holds and tqdm/rich draw live: auto (local "
      "rank 0, for each of its streams shown on a launcher terminal), on (local rank 0), off, or a local rank"));
  s.add(
      key("launch.gpu_ids", &C::launch, &LaunchConfig::gpu_ids,
          "GPUs to use, e.g. 0,2 or GPU-<uuid>,... (local rank i gets the i-th; indices count the visible GPUs, "
          "GPU-/MIG- UUIDs are used as they are); auto: the nproc GPUs with the most free memory; empty: all visible"));
  s.add(key("launch.virtual_local_rank", &C::launch, &LaunchConfig::virtual_local_rank,
            "torchrun's --virtual-local-rank: every worker gets LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES of its one GPU "
            "(its gpu_ids entry; else the launcher's CUDA_VISIBLE_DEVICES entry at its local rank; else its local "
            "rank), which it sees as cuda:0"));
  s.add(key("launch.threads_per_worker", &C::launch, &LaunchConfig::threads_per_worker,
            "each worker's OMP_NUM_THREADS (its intra-op threads); 0: auto, the CPUs this node may use (affinity "
            "mask, cgroup quota) divided among the workers that share them, the other nodes' on the same CPUs "
            "included; an OMP_NUM_THREADS of the launcher's environment wins over auto (docs/launch.md#threads)")
            .range(0, 4096));
  s.add(key("launch.grace_period", &C::launch, &LaunchConfig::grace_period,
            "seconds between SIGTERM and SIGKILL when stopping workers (torchrun's default 30)")
            .range(0, 3600));
  s.add(key("launch.standalone", &C::launch, &LaunchConfig::standalone,
            "single-node job on localhost with a free port (torchrun --standalone)"));
  s.add(key("launch.slurm", &C::launch, &LaunchConfig::slurm,
            "inside a SLURM job: auto fills nnodes, node_rank, master_addr, master_port, run_id and nproc from SLURM_* "
            "when not given (docs/slurm.md); off ignores SLURM"));
  s.add(key("launch.slurm_requeue", &C::launch, &LaunchConfig::slurm_requeue,
            "inside a SLURM job: node 0 runs `scontrol requeue` when the workers saved a checkpoint and stopped "
            "(preemption), so the job resumes"));
  s.add(key("launch.hang_timeout", &C::launch, &LaunchConfig::hang_timeout,
            "hang detection: seconds a rank that reports progress (MGTRAIN_HEARTBEAT_FILE) may make none before it "
            "counts as hung (--heartbeat-timeout is its old spelling); 0: off")
            .at_least(0));
  s.add(key("launch.diagnose_timeout", &C::launch, &LaunchConfig::diagnose_timeout,
            "hang detection: seconds to collect diagnostics (stack dumps) of the ranks before they are stopped")
            .range(0, 3600));
  s.add(key("launch.worker", &C::launch, &LaunchConfig::worker,
            "path of the worker binary; empty: mgtrain-worker next to mgtrain, else the trainer wheel's"));
  s.add(key("launch.python", &C::launch, &LaunchConfig::python,
            "interpreter that runs a launched .py script or -m module; empty: $PYTHON_EXEC when set (as torchrun), "
            "else python3 on PATH"));
  s.add(key("launch.role", &C::launch, &LaunchConfig::role, "torchrun's --role: the workers' ROLE_NAME")
            .must("a name without blanks", [](const std::string& v) { return check_plain_word(v, false); }));
  s.add(key("launch.rdzv_endpoint", &C::launch, &LaunchConfig::rdzv_endpoint,
            "HOST[:PORT] of the dynamic rendezvous (torchrun's c10d): node ranks are assigned on arrival; the node "
            "that can bind it hosts it (port default 29400); HOST:0 with nnodes 1: a single node on a free port; "
            "empty: static ranks from node_rank"));
  s.add(key("launch.rdzv_backend", &C::launch, &LaunchConfig::rdzv_backend,
            "with rdzv_endpoint: c10d (ranks on arrival) or static (the endpoint is node 0's master_addr:master_port); "
            "both use mgtrain's own protocol"));
  s.add(key("launch.rdzv_token_file", &C::launch, &LaunchConfig::rdzv_token_file,
            "multi-node: a file (mode 600) holding the secret every node authenticates the rendezvous with; "
            "MGTRAIN_RDZV_TOKEN and --rdzv-token win over it (docs/multinode.md#the-rendezvous-token)"));
  s.add(key("launch.join_timeout", &C::launch, &LaunchConfig::join_timeout,
            "multi-node: seconds for the nodes to meet (every node static, at least MIN dynamic) before the job fails "
            "naming the missing ones")
            .range(0.01, 1e6));
  s.add(
      key("launch.last_call_timeout", &C::launch, &LaunchConfig::last_call_timeout,
          "dynamic rendezvous: seconds a round waits for more nodes once MIN have arrived (it closes at once with MAX)")
          .range(0, 1e6));
  s.add(key("launch.node_timeout", &C::launch, &LaunchConfig::node_timeout,
            "multi-node: seconds without any message, beyond the moment the next heartbeat was due, after which a node "
            "(or the rendezvous server) counts as dead")
            .range(0.01, 1e6));
  s.add(key("launch.node_heartbeat_interval", &C::launch, &LaunchConfig::node_heartbeat_interval,
            "multi-node: seconds between the agents' heartbeats (at most a third of node_timeout is used)")
            .range(0.01, 1e6));
  s.add(key("launch.allow_uneven_nproc", &C::launch, &LaunchConfig::allow_uneven_nproc,
            "multi-node: nodes may run different numbers of workers (ranks in node order); otherwise a different nproc "
            "is an error"));
  s.add(
      key("launch.local_addr", &C::launch, &LaunchConfig::local_addr,
          "torchrun's --local-addr: recorded only; mgtrain's nodes meet at rdzv_endpoint (or master_addr), where node "
          "0 also hosts the workers' store, so no node advertises an address of its own")
          .normalized(without_brackets)
          .must(std::string("empty, or ") + kAddressRule, check_address));
  s.add(
      key("launch.hosts", &C::launch, &LaunchConfig::hosts,
          "start one node agent per host through remote_shell, e.g. a:4,b:4 (host:workers; the first host is node 0)"));
  s.add(key("launch.hostfile", &C::launch, &LaunchConfig::hostfile,
            "like hosts, from a file with lines `host slots=4` (# comments)"));
  s.add(key("launch.remote_shell", &C::launch, &LaunchConfig::remote_shell,
            "command that runs a node agent on {host}; the agent's command line follows as one shell-quoted argument")
            .must("a command containing {host}", check_remote_shell));
  s.add(key("launch.exit_with_stdin", &C::launch, &LaunchConfig::exit_with_stdin,
            "stop the job like SIGHUP when stdin closes (set by hosts/hostfile for remote agents, so none outlives its "
            "remote shell)"));
  s.add(key("launch.signals_to_handle", &C::launch, &LaunchConfig::signals_to_handle,
            "torchrun's --signals-to-handle; torchrun personality only: these signals stop the job (the workers get "
            "the same signal, SIGKILL after grace_period; exit 1), any other of the six stops the workers and the "
            "launcher dies by it. `mgtrain launch` always stops on TERM/INT/HUP/QUIT and forwards USR1/USR2"));
  s.add(key("launch.status_port", &C::launch, &LaunchConfig::status_port,
            "serve the status API and dashboard on this port (docs/monitoring.md); 0: off")
            .range(0, 65535));
  s.add(key("launch.status_bind", &C::launch, &LaunchConfig::status_bind,
            "address the status server listens on (loopback unless you ask otherwise)")
            .normalized(without_brackets)
            .must(kAddressRule, check_address));
  s.add(key("launch.straggler_detection", &C::launch, &LaunchConfig::straggler_detection,
            "flag a rank whose step rate stays below the other ranks' median by more than straggler_margin (console "
            "warning, status API, /metrics, run.json; docs/diagnosis.md#stragglers); works whenever the workers have "
            "progress files (hang_timeout or status_port set), single-node launches only"));
  s.add(key("launch.snapshot_replicas", &C::launch, &LaunchConfig::snapshot_replicas,
            "several nodes: send this node's snapshots in memory to the next node of the ring and keep the previous "
            "node's, so a node lost with its memory loses no state (docs/checkpoints.md#replicas-on-a-buddy-node); "
            "false: neither"));
  s.add(key("launch.straggler_margin", &C::launch, &LaunchConfig::straggler_margin,
            "a straggler is slower than the other ranks' median step rate by more than this fraction (0.2 = 20 %); "
            "it is cleared once within half of it")
            .range(0.01, 0.99));
  s.add(key("launch.straggler_window", &C::launch, &LaunchConfig::straggler_window,
            "seconds each rank's step rate is measured over; a rank is flagged (and cleared) when the condition has "
            "held for half of it. Make it hold at least ten steps")
            .range(1, 86400));
  s.add(key("launch.console_dedup", &C::launch, &LaunchConfig::console_dedup,
            "a whole line that several ranks print identically within 0.2 s is shown once, as [ranks 0-3] text (the "
            "rank logs keep every copy; docs/launch.md#console-deduplication): on, off, or auto (on from 4 ranks on "
            "this node's console, or in the whole job under --hosts, whose launcher merges the hosts' lines; off in "
            "the torchrun personality)"));
  s.add(key("launch.termination_log", &C::launch, &LaunchConfig::termination_log,
            "file that gets a failed job's one-line root cause (Kubernetes' terminationMessagePath: kubectl describe "
            "pod shows it; docs/launch.md#termination-message); empty: /dev/termination-log when it exists; none: "
            "off"));
}

// model: the network the built-in trainer builds.
void add_model_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(registrable_key("model.type", &C::model, &ModelConfig::type, &ModelConfig::registered,
                        "network the trainer builds (docs/trainer.md)"));
  s.add(key("model.hidden_sizes", &C::model, &ModelConfig::hidden_sizes, "mlp: hidden layer widths").at_least(1));
  s.add(key("model.dropout", &C::model, &ModelConfig::dropout, "dropout probability (mlp, gpt)").range(0, 1));
  s.add(
      key("model.channels", &C::model, &ModelConfig::channels, "cnn: output channels of each conv block").at_least(1));
  s.add(key("model.batch_norm", &C::model, &ModelConfig::batch_norm, "cnn: batch norm after each convolution"));
  s.add(key("model.fc_sizes", &C::model, &ModelConfig::fc_sizes,
            "cnn: widths of the fully connected layers before the classifier")
            .at_least(1));
  s.add(key("model.resnet_blocks", &C::model, &ModelConfig::resnet_blocks, "resnet: residual blocks per stage")
            .range(1, 64));
  s.add(key("model.layers", &C::model, &ModelConfig::layers, "gpt: transformer blocks").range(1, 1024));
  s.add(
      key("model.heads", &C::model, &ModelConfig::heads, "gpt: attention heads (must divide d_model)").range(1, 1024));
  s.add(key("model.d_model", &C::model, &ModelConfig::d_model, "gpt: embedding width").range(1, 65536));
  s.add(
      key("model.context_length", &C::model, &ModelConfig::context_length, "gpt: tokens per sample").range(1, 1 << 20));
  s.add(key("model.path", &C::model, &ModelConfig::path,
            "torchscript: file written by torch.jit.script(model).save(path)"));
  s.add(options_key("model.options", &C::model, &ModelConfig::options,
                    "a registered model's own keys, as it declares them (docs/trainer.md#bring-your-own-model)"));
}

// data: the data set and its loader.
void add_data_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(registrable_key("data.dataset", &C::data, &DataConfig::dataset, &DataConfig::registered,
                        "data set format (docs/trainer.md)"));
  s.add(key("data.path", &C::data, &DataConfig::path,
            "directory (mnist, cifar10, npy) or file (tokens) holding the data; a registered data set reads it too"));
  s.add(key("data.input_shape", &C::data, &DataConfig::input_shape, "synthetic: shape of one sample").at_least(1));
  s.add(key("data.num_classes", &C::data, &DataConfig::num_classes, "synthetic: number of classes").range(2, 1 << 20));
  s.add(key("data.synthetic_samples", &C::data, &DataConfig::synthetic_samples,
            "synthetic: samples in the training split")
            .at_least(1));
  s.add(key("data.loader_threads", &C::data, &DataConfig::loader_threads, "background threads preparing batches")
            .range(0, 64));
  s.add(key("data.prefetch_batches", &C::data, &DataConfig::prefetch_batches,
            "batches prepared ahead of the training step")
            .range(1, 1024));
  s.add(key("data.shuffle", &C::data, &DataConfig::shuffle, "reshuffle the training split every epoch (seed + epoch)"));
  s.add(key("data.drop_last", &C::data, &DataConfig::drop_last,
            "drop the tail so every rank gets equal full batches (else pad by repeating samples)"));
  s.add(options_key("data.options", &C::data, &DataConfig::options,
                    "a registered data set's own keys, as it declares them"));
}

// train: the training loop.
void add_train_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(key("train.epochs", &C::train, &TrainConfig::epochs, "passes over the training split").at_least(1));
  s.add(key("train.max_steps", &C::train, &TrainConfig::max_steps,
            "stop after this many optimizer steps; 0: run all epochs")
            .at_least(0));
  s.add(key("train.batch_size", &C::train, &TrainConfig::batch_size, "samples per rank per micro-step")
            .range(1, 1 << 24));
  s.add(key("train.grad_accum_steps", &C::train, &TrainConfig::grad_accum_steps,
            "micro-steps per optimizer step (gradients reduced on the last)")
            .range(1, 1 << 16));
  s.add(key("train.eval_every_steps", &C::train, &TrainConfig::eval_every_steps,
            "evaluate on the test split every N steps; 0: never by steps")
            .at_least(0));
  s.add(key("train.eval_at_epoch_end", &C::train, &TrainConfig::eval_at_epoch_end,
            "evaluate on the test split at the end of every epoch"));
  s.add(key("train.seed", &C::train, &TrainConfig::seed, "seed of model init and data order (identical on all ranks)")
            .at_least(0));
  s.add(key("train.clip_grad_norm", &C::train, &TrainConfig::clip_grad_norm,
            "clip gradients to this global norm after reduction; 0: off")
            .at_least(0));
  s.add(
      key("train.device", &C::train, &TrainConfig::device, "where to train: auto (cuda:LOCAL_RANK if CUDA, else cpu)"));
  s.add(key(
      "train.precision", &C::train, &TrainConfig::precision,
      "fp32; bf16: autocast to bfloat16 (CPU, CUDA); fp16: autocast to float16 with dynamic loss scaling (CUDA only)"));
  s.add(key("train.loss_scale_init", &C::train, &TrainConfig::loss_scale_init, "fp16: initial loss scale")
            .range(1e-30, 1e30));
  s.add(key("train.loss_scale_growth_factor", &C::train, &TrainConfig::loss_scale_growth_factor,
            "fp16: scale multiplier after growth_interval steps without inf/nan gradients")
            .range(1, 1e6));
  s.add(key("train.loss_scale_backoff_factor", &C::train, &TrainConfig::loss_scale_backoff_factor,
            "fp16: scale multiplier after a step with inf/nan gradients (the step is skipped)")
            .range(1e-6, 1));
  s.add(key("train.loss_scale_growth_interval", &C::train, &TrainConfig::loss_scale_growth_interval,
            "fp16: consecutive finite steps before the scale grows")
            .range(1, 1LL << 40));
  s.add(key("train.gpu_memory_fraction", &C::train, &TrainConfig::gpu_memory_fraction,
            "CUDA: cap the caching allocator at this fraction of the device's memory; 0: no cap")
            .range(0, 1));
}

// optim: optimizer and learning-rate schedule.
void add_optim_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(key("optim.name", &C::optim, &OptimConfig::name, "optimizer"));
  s.add(key("optim.lr", &C::optim, &OptimConfig::lr, "peak learning rate").range(0, 1e6));
  s.add(key("optim.momentum", &C::optim, &OptimConfig::momentum, "sgd momentum").range(0, 1));
  s.add(key("optim.nesterov", &C::optim, &OptimConfig::nesterov, "sgd Nesterov momentum"));
  s.add(
      key("optim.weight_decay", &C::optim, &OptimConfig::weight_decay, "L2 penalty (decoupled for adamw)").at_least(0));
  s.add(key("optim.beta1", &C::optim, &OptimConfig::beta1, "adam/adamw beta1").range(0, 1));
  s.add(key("optim.beta2", &C::optim, &OptimConfig::beta2, "adam/adamw beta2").range(0, 1));
  s.add(key("optim.eps", &C::optim, &OptimConfig::eps, "adam/adamw epsilon").range(0, 1));
  s.add(key("optim.schedule", &C::optim, &OptimConfig::schedule, "learning-rate schedule after warmup"));
  s.add(key("optim.warmup_steps", &C::optim, &OptimConfig::warmup_steps, "steps of linear warmup from 0 to lr")
            .at_least(0));
  s.add(key("optim.step_size", &C::optim, &OptimConfig::step_size, "step schedule: steps between decays").at_least(1));
  s.add(key("optim.gamma", &C::optim, &OptimConfig::gamma, "step schedule: decay factor").range(0, 1));
  s.add(key("optim.min_lr", &C::optim, &OptimConfig::min_lr, "cosine/linear: final learning rate").at_least(0));
  s.add(key("optim.scale_lr_with_world_size", &C::optim, &OptimConfig::scale_lr_with_world_size,
            "multiply lr by the world size (linear scaling rule)"));
}

// ddp: process group and gradient synchronisation.
void add_ddp_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(key("ddp.backend", &C::ddp, &DdpConfig::backend, "process group backend: auto (nccl with CUDA, else gloo)"));
  s.add(key("ddp.bucket_cap_mb", &C::ddp, &DdpConfig::bucket_cap_mb, "gradient bucket size in MiB").range(0.001, 4096));
  s.add(key("ddp.first_bucket_mb", &C::ddp, &DdpConfig::first_bucket_mb, "size of the first (smallest) bucket in MiB")
            .range(0.001, 4096));
  s.add(key("ddp.broadcast_buffers", &C::ddp, &DdpConfig::broadcast_buffers,
            "broadcast rank 0's buffers (e.g. batch-norm statistics) every step"));
  s.add(key("ddp.find_unused_parameters", &C::ddp, &DdpConfig::find_unused_parameters,
            "treat parameters without a gradient in a step as zero instead of waiting for them"));
  s.add(key("ddp.gradient_as_bucket_view", &C::ddp, &DdpConfig::gradient_as_bucket_view,
            "let gradients live inside the buckets: saves two copies per step (on by default, unlike Python, since the "
            "trainer owns zero_grad)"));
  s.add(key("ddp.timeout_s", &C::ddp, &DdpConfig::timeout_s, "seconds a collective may take before it fails")
            .range(1, 1e6));
  s.add(key("ddp.connect_timeout_s", &C::ddp, &DdpConfig::connect_timeout_s,
            "seconds to wait for the store and all peers at start")
            .range(1, 1e6));
  s.add(key("ddp.force_process_group", &C::ddp, &DdpConfig::force_process_group,
            "tests only: at world size 1 too, build the process group (ddp.backend), the gradient reducer and the step "
            "vote, e.g. to run NCCL on a one-GPU machine; no shared-memory path"));
  s.add(key("ddp.skip_allreduce", &C::ddp, &DdpConfig::skip_allreduce,
            "benchmarks only: skip the gradient all-reduce to time a step without communication (ranks diverge)"));
  s.add(key("ddp.sync_batch_norm", &C::ddp, &DdpConfig::sync_batch_norm,
            "synchronise batch-norm statistics over all ranks (like torch.nn.SyncBatchNorm)"));
  s.add(key("ddp.strategy", &C::ddp, &DdpConfig::strategy,
            "ddp: one process per device; dp: legacy single-process DataParallel over the selected GPUs (CUDA only, "
            "slower)"));
}

// checkpoint: when and where rank 0 saves, and what a run resumes from.
void add_checkpoint_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(key("checkpoint.dir", &C::checkpoint, &CheckpointConfig::dir,
            "directory of the run's checkpoints; empty: never save or resume"));
  s.add(key("checkpoint.every_steps", &C::checkpoint, &CheckpointConfig::every_steps,
            "save every N optimizer steps; 0: not by steps")
            .at_least(0));
  s.add(key("checkpoint.every_epochs", &C::checkpoint, &CheckpointConfig::every_epochs,
            "save every N epochs; 0: not by epochs")
            .at_least(0));
  s.add(key("checkpoint.every_minutes", &C::checkpoint, &CheckpointConfig::every_minutes,
            "save when this many minutes passed since the last save (rank 0's clock); 0: not by time")
            .range(0, 1e6));
  s.add(key("checkpoint.snapshot_every", &C::checkpoint, &CheckpointConfig::snapshot_every,
            "every N optimizer steps, each rank copies the whole state into a store its launcher keeps in memory "
            "(a restart resumes from it when it is newer than the newest file); 0: no snapshots")
            .at_least(0));
  s.add(key("checkpoint.at_end", &C::checkpoint, &CheckpointConfig::at_end, "save after the last step"));
  s.add(key("checkpoint.keep_last", &C::checkpoint, &CheckpointConfig::keep_last,
            "checkpoints kept on disk (older ones are deleted)")
            .at_least(1));
  s.add(key("checkpoint.best_metric", &C::checkpoint, &CheckpointConfig::best_metric,
            "also keep the checkpoint with the best value of this eval metric (pointer file `best`); empty: off"));
  s.add(key("checkpoint.async", &C::checkpoint, &CheckpointConfig::async,
            "write checkpoints in a background thread (training waits only for the copy to memory)"));
  s.add(key("checkpoint.when_busy", &C::checkpoint, &CheckpointConfig::when_busy,
            "a save due while the previous one is still being written: wait for it, or skip this one"));
  s.add(key("checkpoint.on_write_error", &C::checkpoint, &CheckpointConfig::on_write_error,
            "a failed write (disk full, permissions): stop training (exit 1), or continue and warn"));
  s.add(key("checkpoint.resume", &C::checkpoint, &CheckpointConfig::resume,
            "auto: newest valid checkpoint in dir; never; or a checkpoint file, a latest/best pointer file or a "
            "directory (its newest valid checkpoint)")
            .one_of_or({"auto", "never"}, "auto, never or a path"));
}

// log: logging of the trainer.
void add_log_keys(SchemaBuilder& s) {
  using C = Config;
  s.add(key("log.level", &C::log, &LogConfig::level, "least severe message printed"));
  s.add(key("log.every_steps", &C::log, &LogConfig::every_steps, "rank 0 prints a progress line every N steps")
            .at_least(1));
  s.add(key("log.progress", &C::log, &LogConfig::progress,
            "rank 0's progress display: auto (a live bar on a TTY, plain lines otherwise), bar, lines, off"));
  s.add(key("log.metrics_every_steps", &C::log, &LogConfig::metrics_every_steps,
            "write a row of <run dir>/metrics.jsonl every N steps (and after every eval); 0: no metrics")
            .at_least(0));
  s.add(key("log.tensorboard", &C::log, &LogConfig::tensorboard,
            "also write the metrics as TensorBoard event files under <run dir>/tensorboard"));
  s.add(key("log.resource_interval_s", &C::log, &LogConfig::resource_interval_s,
            "seconds between CPU%/RSS/GPU samples recorded in the metrics; 0: no sampling")
            .range(0, 1e6));
}

}  // namespace

std::vector<KeyDef> build_schema() {
  SchemaBuilder s;
  add_launch_keys(s);
  add_model_keys(s);
  add_data_keys(s);
  add_train_keys(s);
  add_optim_keys(s);
  add_ddp_keys(s);
  add_checkpoint_keys(s);
  add_log_keys(s);
  return s.take();
}

}  // namespace mgtrain::schema_detail
