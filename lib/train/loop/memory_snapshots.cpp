// Snapshots in the launcher's memory (see memory_snapshots.hpp).
#include "train/loop/memory_snapshots.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "contract/worker_variables.hpp"
#include "train/state/train_state.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

// MGTRAIN_SNAPSHOT_FD: an open descriptor >= 3, or nothing when unset.
Fd snapshot_fd_from_environment() {
  const char* text = std::getenv(kSnapshotFdVariable);
  if (text == nullptr) return Fd();
  char* end = nullptr;
  const long fd = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || fd < 3 || fd > 1 << 20) {
    throw Error(
        fmt::format("{}={}: not a descriptor number (the launcher sets it; unset it to run without "
                    "snapshots in memory)",
                    kSnapshotFdVariable, text));
  }
  if (::fcntl(static_cast<int>(fd), F_GETFD) < 0) {
    throw Error(
        fmt::format("{}={}: no such open descriptor in this process (was the worker started by something "
                    "other than mgtrain launch? unset it to run without snapshots in memory)",
                    kSnapshotFdVariable, text));
  }
  return Fd(static_cast<int>(fd));
}

// MGTRAIN_SNAPSHOT_REPLICAS: "rank:fd,..." of open descriptors (the launcher's replicas of another node's ranks).
std::vector<std::pair<int, Fd>> replica_fds_from_environment() {
  std::vector<std::pair<int, Fd>> fds;
  const char* text = std::getenv(kSnapshotReplicasVariable);
  if (text == nullptr || *text == '\0') return fds;
  const std::string all = text;
  std::size_t at = 0;
  while (at <= all.size()) {
    const std::size_t comma = std::min(all.find(',', at), all.size());
    const std::string item = all.substr(at, comma - at);
    int rank = -1, fd = -1, used = 0;
    if (std::sscanf(item.c_str(), "%d:%d%n", &rank, &fd, &used) != 2 || used != static_cast<int>(item.size()) ||
        rank < 0 || fd < 3 || ::fcntl(fd, F_GETFD) < 0) {
      throw Error(
          fmt::format("{}={}: '{}' is not rank:descriptor of an open descriptor (the launcher sets it; unset it "
                      "to resume without replicas)",
                      kSnapshotReplicasVariable, all, item));
    }
    fds.emplace_back(rank, Fd(fd));
    at = comma + 1;
  }
  return fds;
}

// Test hooks: the snapshot's writer stops for good in the middle of writing a snapshot (the image written, the slot
// not yet complete), for kill-mid-snapshot tests. MGTRAIN_TEST_SNAPSHOT_PAUSE_AT_STEP=N (test_snapshot_resume.cpp):
// every rank of the first attempt (TORCHELASTIC_RESTART_COUNT 0) at the snapshot of step N.
// MGTRAIN_TEST_SNAPSHOT_PAUSE_FILE=PATH (scripts/bench/recovery_campaign.sh): a rank at its first snapshot after PATH
// appeared; it removes PATH first, so one rank stops per file.
std::optional<std::int64_t> test_pause_step() {
  const char* text = std::getenv("MGTRAIN_TEST_SNAPSHOT_PAUSE_AT_STEP");
  const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
  long long step = -1;
  if (text == nullptr || std::sscanf(text, "%lld", &step) != 1) return std::nullopt;
  if (restarts != nullptr && std::string(restarts) != "0") return std::nullopt;
  return step;
}

std::string test_pause_file() {
  const char* path = std::getenv("MGTRAIN_TEST_SNAPSHOT_PAUSE_FILE");
  return path != nullptr ? path : "";
}

[[noreturn]] void test_hook_pause_here(std::int64_t step) {
  std::fprintf(stderr, "mgtrain-test: snapshot write paused at step %lld\n", static_cast<long long>(step));
  std::fflush(stderr);
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace

MemorySnapshots::MemorySnapshots(const CheckpointConfig& config, CheckpointContent& content, Communicator& comm)
    : every_(config.snapshot_every),
      content_(content),
      comm_(comm),
      pause_at_step_(test_pause_step()),
      pause_file_(test_pause_file()) {
  if (every_ <= 0) return;
  fd_ = snapshot_fd_from_environment();
  if (fd_) {
    store_ = std::make_unique<SnapshotStore>(
        fd_.get(), fmt::format("the snapshot store of rank {} ({}={})", comm_.rank(), kSnapshotFdVariable, fd_.get()));
  }
  for (auto& [rank, fd] : replica_fds_from_environment()) {
    Replica replica{rank, std::move(fd), nullptr};
    replica.store = std::make_unique<SnapshotStore>(
        replica.fd.get(), fmt::format("the replica of rank {}'s snapshots on rank {}'s node", rank, comm_.rank()));
    replicas_.push_back(std::move(replica));
  }
}

MemorySnapshots::~MemorySnapshots() = default;

std::optional<MemorySnapshots::Newest> MemorySnapshots::survey() {
  if (every_ <= 0) return std::nullopt;
  std::vector<std::string> skipped;
  if (store_) mine_ = store_->newest(skipped);
  best_replica_.reset();
  best_replica_rank_ = -1;
  for (Replica& replica : replicas_) {
    std::optional<SnapshotStore::Snapshot> newest = replica.store->newest(skipped);
    if (newest && (!mine_ || newest->step > mine_->step) && (!best_replica_ || newest->step > best_replica_->step)) {
      best_replica_ = std::move(newest);
      best_replica_rank_ = replica.rank;
    }
  }
  for (const std::string& note : skipped) log::warn("skipping damaged snapshot: {}", note);
  // One row per rank: whether it has a store, its own newest snapshot's step + 1 (0: none), and its newest replica
  // newer than that: step + 1 and the rank it is of + 1 (0: none).
  at::Tensor rows = at::zeros({comm_.world_size(), 4}, at::kLong);
  rows[comm_.rank()][0] = store_ ? 1 : 0;
  rows[comm_.rank()][1] = mine_ ? mine_->step + 1 : 0;
  rows[comm_.rank()][2] = best_replica_ ? best_replica_->step + 1 : 0;
  rows[comm_.rank()][3] = best_replica_ ? best_replica_rank_ + 1 : 0;
  comm_.allreduce_sum(rows);
  const auto stores = rows.select(1, 0).sum().item<std::int64_t>();
  on_ = stores > 0;
  if (!on_) {
    if (comm_.rank() == 0) {
      log::progress(
          "note: no snapshots in memory (checkpoint.snapshot_every): {} is not set, as when the worker is not "
          "started by mgtrain launch",
          kSnapshotFdVariable);
    }
    return std::nullopt;
  }
  const at::Tensor steps = rows.select(1, 1), replica_steps = rows.select(1, 2);
  const auto own_newest = steps.max().item<std::int64_t>();
  const auto newest = std::max(own_newest, replica_steps.max().item<std::int64_t>());
  if (newest == 0) return std::nullopt;
  Newest found;
  found.step = newest - 1;
  found.everywhere = steps.eq(newest).all().item<bool>();
  if (own_newest == newest) {  // a rank's own copy first
    found.holder = static_cast<int>(steps.eq(newest).nonzero()[0][0].item<std::int64_t>());
  } else {
    found.holder = static_cast<int>(replica_steps.eq(newest).nonzero()[0][0].item<std::int64_t>());
    found.replica_of = static_cast<int>(rows[found.holder][3].item<std::int64_t>()) - 1;
  }
  return found;
}

TrainPosition MemorySnapshots::restore(const Newest& newest) {
  const auto start = Clock::now();
  const bool mine = mine_ && mine_->step == newest.step;
  if (newest.everywhere) return content_.restore(mine_->image, describe(newest), seconds_since(start));
  // The holder's image to every rank: those that hold the same step use their own.
  at::Tensor bytes;
  if (comm_.rank() == newest.holder) {
    const CheckpointFile& image = newest.replica_of >= 0 ? best_replica_->image : mine_->image;
    bytes = at::from_blob(const_cast<unsigned char*>(image.data()), {static_cast<std::int64_t>(image.file_size())},
                          at::kByte);
  }
  const at::Tensor received = broadcast_bytes(comm_, bytes, newest.holder);
  if (mine) return content_.restore(mine_->image, describe(newest), seconds_since(start));
  const CheckpointFile sent =
      read_checkpoint_image(fmt::format("the snapshot of step {} rank {} sent", newest.step, newest.holder),
                            received.data_ptr<unsigned char>(), static_cast<std::uint64_t>(received.numel()));
  return content_.restore(sent, describe(newest), seconds_since(start));
}

bool MemorySnapshots::take_prints() const {
  static const bool bench = std::getenv("MGTRAIN_BENCH_SNAPSHOT") != nullptr;  // scripts/bench/snapshot.sh: every one
  return on_ && store_ && comm_.rank() == 0 && (!announced_ || bench);
}

std::string MemorySnapshots::describe(const Newest& newest) const {
  if (newest.everywhere) return "the snapshot in memory (each rank's own copy)";
  if (newest.replica_of >= 0) {
    return fmt::format("the replica of rank {}'s snapshot that rank {}'s node holds (sent to every rank)",
                       newest.replica_of, newest.holder);
  }
  return fmt::format("the snapshot in memory of rank {} (sent to the ranks that lack it)", newest.holder);
}

std::optional<MemorySnapshots::Held> MemorySnapshots::held() const {
  if (!mine_) return std::nullopt;
  return Held{mine_->step, static_cast<double>(mine_->written_unix_ms) / 1000.0};
}

bool MemorySnapshots::take(const TrainPosition& at) {
  if (!on_) return false;
  const auto start = Clock::now();
  const CheckpointContent::RngRows rng = content_.gather_rng_rows();
  if (!store_) return false;
  const NamedTensors tensors = content_.tensors(rng);
  // Each tensor's bytes on the CPU, contiguous: the live CPU tensors as they are, GPU ones through one staged copy.
  const bool on_gpu = std::any_of(tensors.begin(), tensors.end(), [](const auto& t) { return !t.second.is_cpu(); });
  std::vector<TensorRecord> records;
  NamedTensors contiguous;
  if (on_gpu) {
    staging_.take(tensors);
    for (const TensorView& view : staging_.views())
      records.push_back(TensorRecord{view.name, view.dtype, view.shape, view.data, view.nbytes});
  } else {
    for (const auto& [name, tensor] : tensors) {
      const at::Tensor& bytes = contiguous.emplace_back(name, tensor.contiguous()).second;
      records.push_back(TensorRecord{name, dtype_name(bytes.scalar_type()),
                                     std::vector<std::int64_t>(bytes.sizes().begin(), bytes.sizes().end()),
                                     bytes.data_ptr(), bytes.nbytes()});
    }
  }
  const CheckpointImage image(fmt::format("the snapshot of step {}", at.step),
                              content_.metadata(at, "snapshot", nullptr), std::move(records));
  try {
    store_->write(at.step, image.size(), [&](unsigned char* room) {
      image.write(room, image.size());
      const bool file_taken = !pause_file_.empty() && ::unlink(pause_file_.c_str()) == 0;
      if (pause_at_step_ == at.step || file_taken) test_hook_pause_here(at.step);
    });
  } catch (const SystemError& e) {
    // No room (a memory limit, RLIMIT_FSIZE): training goes on; this rank takes no more snapshots, the others do.
    log::warn("rank {} takes no more snapshots in memory: {}", comm_.rank(), e.what());
    store_.reset();
    return false;
  }
  if (take_prints()) {  // rank 0's first: what a snapshot costs
    log::progress("snapshot in memory at step {}: {:.1f} MB in {:.1f} ms (every {} steps: checkpoint.snapshot_every)",
                  at.step, static_cast<double>(image.size()) / 1e6, seconds_since(start) * 1000.0, every_);
  }
  announced_ = true;
  return true;
}

}  // namespace mgtrain
