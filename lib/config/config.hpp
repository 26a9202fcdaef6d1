// The resolved configuration of a run: plain data, one struct per YAML section.
// Defaults live here (member initialisers; the launch ones that other structs start from too are named in
// launch_defaults.hpp); keys, types, ranges and docs live in config_schema_keys.cpp; options with a fixed set of
// values are enum classes (config_enums.hpp), launch settings with a grammar of their own are typed values parsed
// once where they enter (launch_settings.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config_enums.hpp"
#include "config/launch_defaults.hpp"
#include "config/launch_settings.hpp"

namespace mgtrain {

// `launch:` — how workers are spawned and supervised (also settable by `mgtrain launch` flags).
struct LaunchConfig {
  NprocSpec nproc;   // N | auto | gpu | cpu (default 1)
  NodeRange nnodes;  // N, or MIN:MAX for elastic rendezvous (default 1)
  std::int64_t node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::int64_t master_port = 0;  // 0: pick a free port
  std::int64_t max_restarts = 0;
  std::string run_id;  // empty: generated
  std::string log_dir = "runs";
  StdSpec tee;                      // torchrun compatible: redirected streams shown on the console again (default 0)
  StdSpec redirect;                 // torchrun compatible: streams kept off the console, files get all (default 0)
  LocalRanks local_ranks_filter;    // empty: every local rank prints to the console
  TtySpec tty;                      // auto | on | off | LOCAL_RANK: that worker writes to a pseudo-terminal
  GpuList gpu_ids;                  // empty: all visible GPUs
  bool virtual_local_rank = false;  // torchrun's --virtual-local-rank: LOCAL_RANK=0, each worker sees one GPU
  double grace_period = launch_defaults::kGracePeriodS;  // seconds between SIGTERM and SIGKILL
  std::int64_t threads_per_worker = 0;  // each worker's OMP_NUM_THREADS; 0: auto (the CPUs divided among the workers)
  bool standalone = false;
  SlurmMode slurm = SlurmMode::Auto;  // auto: fill unset settings from a SLURM allocation (docs/slurm.md)
  bool slurm_requeue = true;          // node 0 requeues a SLURM job whose workers saved and stopped (exit 75)
  double hang_timeout = 0.0;          // seconds without progress before a rank counts as hung; 0: off
  double diagnose_timeout = launch_defaults::kDiagnoseTimeoutS;  // seconds to collect diagnostics of a hang
  std::string worker;                                            // path of the worker binary; empty: next to mgtrain
  std::string python;  // interpreter for `launch script.py`; empty: $PYTHON_EXEC, else python3 on PATH
  std::string role = launch_defaults::kRole;  // torchrun's --role: the workers' ROLE_NAME
  // multi-node (docs/multinode.md)
  RdzvEndpoint rdzv_endpoint;  // HOST[:PORT]: dynamic rendezvous, node ranks on arrival; empty: static
  RdzvBackend rdzv_backend = RdzvBackend::C10d;                   // torchrun's names
  double join_timeout = launch_defaults::kJoinTimeoutS;           // seconds for the nodes to meet
  double last_call_timeout = launch_defaults::kLastCallTimeoutS;  // dynamic: wait for more nodes once MIN are there
  double node_timeout = launch_defaults::kNodeTimeoutS;           // seconds without a message: a node is dead
  double node_heartbeat_interval = launch_defaults::kNodeHeartbeatIntervalS;  // between agent heartbeats
  bool allow_uneven_nproc = false;          // nodes may run different numbers of workers
  std::string local_addr;                   // torchrun's --local-addr: recorded; mgtrain's nodes need no own address
  HostList hosts;                           // "a:4,b:4": one agent per host through remote_shell
  std::string rdzv_token_file;              // multi-node: the file with the rendezvous token (docs/multinode.md)
  std::string hostfile;                     // path of a file of lines "host slots=4", read at launch time
  std::string remote_shell = "ssh {host}";  // command that runs an agent on {host}
  bool exit_with_stdin = false;             // stop the job when stdin closes (set by --hosts for its agents)
  // torchrun's --signals-to-handle: in the torchrun personality the signals that stop the job (the workers get the
  // same signal); the launcher dies by any other of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 after stopping
  // its workers. `mgtrain launch` always stops on the first four and forwards SIGUSR1/SIGUSR2.
  SignalList signals_to_handle = SignalList::stopping_default();
  // status API (docs/monitoring.md)
  std::int64_t status_port = 0;           // 0: no status server
  std::string status_bind = "127.0.0.1";  // address the status server listens on
  // straggler detection (docs/diagnosis.md#stragglers): judged from the workers' progress files
  bool straggler_detection = true;  // on whenever the workers have progress files
  double straggler_margin = 0.2;    // flagged when slower than (1 - margin) x the other ranks' median step rate
  double straggler_window = 30.0;   // seconds the rate is measured over; flagged after half of it
  // several nodes: this node's snapshots in memory copied to the next node, and the previous node's kept here
  // (docs/checkpoints.md#replicas-on-a-buddy-node)
  bool snapshot_replicas = true;
  // Kubernetes (docs/launch.md#termination-message): the file that gets a failed job's one-line root cause
  std::string termination_log;  // empty: /dev/termination-log when it exists; "none": off
  // identical lines of several ranks shown once (docs/launch.md#console-deduplication); auto: from 4 ranks on the
  // console, in mgtrain's personality
  ConsoleDedupMode console_dedup = ConsoleDedupMode::Auto;
};

// `model:` — which network the built-in trainer builds.
struct ModelConfig {
  ModelType type = ModelType::Cnn;
  std::vector<std::int64_t> hidden_sizes = {256, 128, 100};  // mlp
  double dropout = 0.0;
  std::vector<std::int64_t> channels = {32, 64};  // cnn conv channels
  bool batch_norm = true;                         // cnn
  std::vector<std::int64_t> fc_sizes = {128};     // cnn fully connected sizes
  std::int64_t resnet_blocks = 2;                 // resnet: blocks per stage
  std::int64_t layers = 4;                        // gpt
  std::int64_t heads = 4;                         // gpt
  std::int64_t d_model = 128;                     // gpt
  std::int64_t context_length = 128;              // gpt
  std::string path;                               // torchscript module file
  std::string registered;                         // type registered: the name the worker registered it under
  std::map<std::string, std::string> options;     // model.options.*: a registered model's own keys (value as text)
};

// `data:` — the data set and its loader.
struct DataConfig {
  DatasetKind dataset = DatasetKind::Mnist;
  std::string path = "/usr/share/datasets/fashion-mnist";
  std::vector<std::int64_t> input_shape = {1, 28, 28};  // synthetic
  std::int64_t num_classes = 10;                        // synthetic
  std::int64_t synthetic_samples = 60000;
  std::int64_t loader_threads = 2;
  std::int64_t prefetch_batches = 4;
  bool shuffle = true;
  bool drop_last = false;
  std::string registered;                      // dataset registered: the name the worker registered it under
  std::map<std::string, std::string> options;  // data.options.*: a registered data set's own keys (value as text)
};

// `train:` — the loop.
struct TrainConfig {
  std::int64_t epochs = 1;
  std::int64_t max_steps = 0;    // 0: run `epochs` epochs
  std::int64_t batch_size = 64;  // per rank
  std::int64_t grad_accum_steps = 1;
  std::int64_t eval_every_steps = 0;  // 0: only at epoch end
  bool eval_at_epoch_end = true;
  std::int64_t seed = 42;
  double clip_grad_norm = 0.0;  // 0: no clipping
  DeviceOption device = DeviceOption::Auto;
  PrecisionMode precision = PrecisionMode::Fp32;  // bf16: autocast; fp16: CUDA, dynamic loss scaling
  double loss_scale_init = 65536.0;               // fp16: first loss scale (torch.cuda.amp.GradScaler's defaults)
  double loss_scale_growth_factor = 2.0;
  double loss_scale_backoff_factor = 0.5;
  std::int64_t loss_scale_growth_interval = 2000;  // steps without inf/nan before the scale grows
  double gpu_memory_fraction = 0.0;                // CUDA: cap of the caching allocator per process; 0: no cap
};

// `optim:` — optimizer and learning-rate schedule.
struct OptimConfig {
  OptimizerName name = OptimizerName::Sgd;
  double lr = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  LrScheduleKind schedule = LrScheduleKind::Constant;
  std::int64_t warmup_steps = 0;
  std::int64_t step_size = 1000;  // step schedule
  double gamma = 0.1;             // step schedule
  double min_lr = 0.0;            // cosine / linear floor
  bool scale_lr_with_world_size = false;
};

// `ddp:` — process group and gradient synchronisation.
struct DdpConfig {
  BackendChoice backend = BackendChoice::Auto;
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool broadcast_buffers = true;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = true;  // Python's default is false; here it is always safe (see docs)
  double timeout_s = 1800.0;            // collective timeout
  double connect_timeout_s = 300.0;     // store / peers rendezvous timeout
  bool skip_allreduce = false;          // benchmarks only: gradients are not synchronised
  bool force_process_group = false;   // world size 1 too gets a process group, reducer and vote (tests one GPU's NCCL)
  bool sync_batch_norm = false;       // batch-norm statistics over all ranks (SyncBatchNorm)
  Strategy strategy = Strategy::Ddp;  // dp: legacy single-process DataParallel, CUDA only
};

// `checkpoint:` — when and where rank 0 saves, and what to resume from.
struct CheckpointConfig {
  std::string dir = "${log_dir}/${run_id}/checkpoints";  // empty: no checkpoints at all
  std::int64_t every_steps = 0;                          // 0: not by steps
  std::int64_t every_epochs = 1;                         // 0: not by epochs
  double every_minutes = 0.0;                            // 0: not by time
  std::int64_t snapshot_every = 50;                      // steps between snapshots in memory; 0: none
  bool at_end = true;                                    // save after the last step
  std::int64_t keep_last = 3;
  BestMetric best_metric = BestMetric::None;  // also keep the best checkpoint by this metric
  bool async = true;                          // write in a background thread
  WhenBusy when_busy = WhenBusy::Wait;        // a save due while the previous write is in flight
  OnWriteError on_write_error = OnWriteError::Stop;
  std::string resume = "auto";  // auto | never | PATH
};

// `log:` — console and file logging of the trainer.
struct LogConfig {
  LogLevel level = LogLevel::Info;
  std::int64_t every_steps = 50;
  ProgressMode progress = ProgressMode::Auto;  // auto: a bar on a terminal, lines otherwise
  std::int64_t metrics_every_steps = 10;       // rows of <run dir>/metrics.jsonl; 0: no metrics file
  bool tensorboard = true;                     // also write TensorBoard event files under <run dir>/tensorboard
  double resource_interval_s = 10.0;           // seconds between CPU/RSS/GPU samples; 0: no sampling
};

struct Config {
  LaunchConfig launch;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  DdpConfig ddp;
  CheckpointConfig checkpoint;
  LogConfig log;
};

}  // namespace mgtrain
