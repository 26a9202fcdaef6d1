// Shared-memory segment, its rendezvous and the chunked sum through it (see shm_segment.hpp).
#include "train/parallel/shm_segment.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <new>
#include <vector>

#include <c10/core/ScalarType.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "host/cpu_allowance.hpp"
#include "host/process_stats.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/log.hpp"
#include "util/timespec.hpp"
#include "util/xxhash64.hpp"

namespace mgtrain {

struct ShmReduceGroup::Header {
  std::uint64_t magic;
  std::uint64_t world;
  std::uint64_t slot_bytes;
  std::uint64_t data_offset;
  std::uint64_t machine;  // machine_id() of the creator: a segment of another machine's rank 0 is refused
};
static_assert(sizeof(ShmReduceGroup::Header) <= 64, "the rank signals start at offset 64");

struct alignas(64) ShmReduceGroup::RankSignal {
  std::atomic<std::uint32_t> arrived;  // the last generation whose chunk this rank has put in its slot
  std::atomic<std::uint32_t> waiters;  // peers sleeping on `arrived` (the publisher wakes only when > 0)
  std::atomic<std::int32_t> pid;       // the rank's process, so a waiting peer notices when it is gone
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kGroupMagic = 0x6d677472'73686d31ULL;   // "mgtrshm1"
constexpr std::uint64_t kBufferMagic = 0x6d677472'62756631ULL;  // "mgtrbuf1"
constexpr std::size_t kSlotBytes = 2u << 20;                    // per rank and parity; larger tensors go in chunks
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "futex words must be plain 32-bit atomics");

// This machine (its kernel's boot id, hashed); 0: unknown. Ranks of one job on several machines each see their own.
std::uint64_t machine_id() {
  static const std::uint64_t id = [] {
    const std::string boot = read_boot_id();
    return boot.empty() ? std::uint64_t{0} : xxhash64(boot.data(), boot.size()) | 1;
  }();
  return id;
}

// What a rank says when rank 0's segment is not on its machine: a normal case (ranks on several machines) that the
// setup answers with gloo and no note.
constexpr const char* kOtherMachine = "rank 0 is on another machine";

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

bool reached(std::uint32_t seen, std::uint32_t generation) { return static_cast<std::int32_t>(seen - generation) >= 0; }

constexpr auto kLivenessCheckInterval = std::chrono::milliseconds(100);  // how often a waiting rank looks at its peer

enum class ProcessState { kAlive, kGone, kUnknown };

// Whether process `pid` still runs: a zombie (exited, not yet reaped by the launcher) counts as gone.
ProcessState peer_liveness(std::int32_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH ? ProcessState::kGone : ProcessState::kUnknown;
  const std::optional<ProcStat> stat = read_proc_stat(pid);
  if (!stat) return ProcessState::kUnknown;
  return stat->state == 'Z' || stat->state == 'X' ? ProcessState::kGone : ProcessState::kAlive;
}

// Shared (not process-private) futexes: the word lives in a segment mapped by several processes.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  relative.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::size_t data_offset_for(int world) {
  return round_up(sizeof(ShmReduceGroup::Header) + 64 + static_cast<std::size_t>(world) * 64, 4096);
}

// Keeps shm names to the characters POSIX allows in them.
std::string sanitized(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return out.substr(0, 160);
}

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }
std::string text_of(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// Unlinks the name when it goes out of scope, unless already done: the segment never outlives the rendezvous.
struct NameGuard {
  std::string name;
  ~NameGuard() { release(); }
  void release() {
    if (!name.empty()) shm_unlink(name.c_str());
    name.clear();
  }
};

struct Mapping {
  void* base = nullptr;
  std::size_t length = 0;
};

// Segment layout: a Header, then from `data_offset` on `slots_per_rank` slots of `slot_bytes` per rank.
struct SegmentShape {
  std::uint64_t magic;
  std::size_t slots_per_rank;
  std::size_t slot_bytes;
  std::size_t data_offset;
  std::size_t length(int world) const {
    return data_offset + static_cast<std::size_t>(world) * slots_per_rank * slot_bytes;
  }
};

Mapping create_segment(const std::string& name, int world, const SegmentShape& shape) {
  const std::size_t length = shape.length(world);
  Fd segment(shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!segment && errno == EEXIST) {  // a stale one of a killed run with the same tag and pid
    shm_unlink(name.c_str());
    segment.reset(shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  }
  const int fd = segment.get();
  if (fd < 0) throw SystemError(fmt::format("shm_open({}) to create the all-reduce segment", name), errno);
  // Reserve the pages now: on a full /dev/shm this fails here instead of SIGBUS on first touch.
  int err = ftruncate(fd, static_cast<off_t>(length)) == 0 ? posix_fallocate(fd, 0, static_cast<off_t>(length)) : errno;
  void* base = err == 0 ? mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (err == 0 && base == MAP_FAILED) err = errno;
  segment.reset();  // the mapping keeps the memory
  if (err != 0) {
    shm_unlink(name.c_str());  // nobody else knows the name yet: do not leave it in /dev/shm
    throw SystemError(fmt::format("reserving {} bytes of shared memory for {}", length, name), err);
  }
  auto* header = new (base) ShmReduceGroup::Header{};
  header->world = static_cast<std::uint64_t>(world);
  header->slot_bytes = shape.slot_bytes;
  header->data_offset = shape.data_offset;
  header->machine = machine_id();
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = shape.magic;
  return {base, length};
}

Mapping open_segment(const std::string& name, int world, std::uint64_t magic, std::size_t slots_per_rank) {
  const Fd segment(shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  const int fd = segment.get();
  if (fd < 0 && errno == ENOENT)
    throw Error(fmt::format("{} ({} is not in this machine's /dev/shm)", kOtherMachine, name));
  if (fd < 0) throw SystemError(fmt::format("shm_open({})", name), errno);
  struct stat info {};
  if (fstat(fd, &info) != 0) throw SystemError(fmt::format("fstat({})", name), errno);
  const auto length = static_cast<std::size_t>(info.st_size);
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  if (base == MAP_FAILED) throw SystemError(fmt::format("mmap({}, {} bytes)", name, length), err);
  const auto* header = static_cast<const ShmReduceGroup::Header*>(base);
  if (length >= sizeof *header && header->magic == magic && header->machine != machine_id()) {
    munmap(base, length);  // the same name by chance on another machine
    throw Error(fmt::format("{} ({} was made on another machine)", kOtherMachine, name));
  }
  if (length < sizeof *header || header->magic != magic || header->world != static_cast<std::uint64_t>(world) ||
      length < header->data_offset + static_cast<std::size_t>(world) * slots_per_rank * header->slot_bytes) {
    munmap(base, length);
    throw Error(fmt::format("shared-memory segment {} does not match this job (world size {})", name, world));
  }
  return {base, length};
}

// The collective setup of one segment: rank 0 creates it under `name` and publishes the name under
// `key`/name, the others map it and answer under `key`/answer/<rank>; the name is unlinked once everyone
// answered. Returns an empty Mapping on every rank when any rank could not take part.
Mapping rendezvous_segment(c10d::Store& store, int rank, int world_size, const std::string& key,
                           const std::string& name, const SegmentShape& shape, bool disabled, double connect_timeout_s,
                           const std::function<void(void*)>& on_mapped = {}) {
  const std::string name_key = key + "/name";
  auto answer_key = [&key](int r) { return fmt::format("{}/answer/{}", key, r); };

  NameGuard guard;
  Mapping mapping;
  std::string refusal;  // why this rank cannot take part; empty: it can
  if (rank == 0) {
    std::string published;
    if (disabled) {
      refusal = "MGTRAIN_SHM_ALLREDUCE=0";
    } else {
      try {
        mapping = create_segment(name, world_size, shape);
        guard.name = published = name;
        if (on_mapped) on_mapped(mapping.base);
      } catch (const Error& e) {
        refusal = e.what();
      }
    }
    store.set(name_key, bytes_of(published));
  } else {
    const std::string published = text_of(store.get(name_key));
    if (published.empty())
      refusal = "rank 0 has no segment";
    else if (disabled)
      refusal = "MGTRAIN_SHM_ALLREDUCE=0";
    else {
      try {
        mapping = open_segment(published, world_size, shape.magic, shape.slots_per_rank);
        if (on_mapped) on_mapped(mapping.base);
      } catch (const Error& e) {
        refusal = e.what();
      }
    }
    store.set(answer_key(rank), bytes_of(refusal.empty() ? "ok" : refusal));
  }

  std::vector<std::string> keys;
  for (int r = 1; r < world_size; ++r) keys.push_back(answer_key(r));
  try {
    store.wait(keys, std::chrono::milliseconds(static_cast<std::int64_t>(connect_timeout_s * 1000)));
  } catch (const std::exception& e) {
    if (mapping.base) munmap(mapping.base, mapping.length);
    throw Error(fmt::format("rank {}: not every rank answered the shared-memory all-reduce setup within {} s: {}", rank,
                            connect_timeout_s, std::string(e.what()).substr(0, std::string(e.what()).find('\n'))));
  }
  guard.release();  // everyone has mapped it (or given up): the name is no longer needed
  std::string why = refusal.empty() ? "" : fmt::format("rank {}: {}", rank, refusal);
  for (int r = 1; r < world_size && why.empty(); ++r) {
    const std::string answer = text_of(store.get(answer_key(r)));
    if (answer != "ok") why = fmt::format("rank {}: {}", r, answer);
  }
  if (!why.empty()) {
    if (mapping.base) munmap(mapping.base, mapping.length);
    // Slower, not wrong: say so unless the user asked for it, or the ranks are on several machines.
    if (rank == 0 && why.find("MGTRAIN_SHM_ALLREDUCE=0") == std::string::npos &&
        why.find(kOtherMachine) == std::string::npos) {
      log::note("shared-memory all-reduce not available ({}); all-reduces go through gloo", why);
    }
    return {};
  }
  return mapping;
}

}  // namespace

std::unique_ptr<ShmReduceGroup> ShmReduceGroup::connect(c10d::Store& store, int rank, int world_size,
                                                        const std::string& run_tag, double connect_timeout_s,
                                                        double timeout_s) {
  const char* env = std::getenv("MGTRAIN_SHM_ALLREDUCE");
  const bool disabled = env && std::string(env) == "0";
  const std::string prefix = fmt::format("/mgtrain-shm-{}-{}", sanitized(run_tag), getpid());
  const SegmentShape shape{kGroupMagic, 2, kSlotBytes, data_offset_for(world_size)};
  // Each rank writes its pid before answering, so once the rendezvous is over every pid is there.
  auto publish_pid = [rank](void* base) {
    reinterpret_cast<RankSignal*>(static_cast<char*>(base) + 64)[rank].pid.store(static_cast<std::int32_t>(getpid()));
  };
  Mapping mapping = rendezvous_segment(store, rank, world_size, "mgtrain/shm", prefix, shape, disabled,
                                       connect_timeout_s, publish_pid);
  if (!mapping.base) return nullptr;
  const auto* header = static_cast<const Header*>(mapping.base);
  return std::unique_ptr<ShmReduceGroup>(
      new ShmReduceGroup(mapping.base, mapping.length, rank, world_size, header->slot_bytes, timeout_s, prefix));
}

ShmReduceGroup::ShmReduceGroup(void* base, std::size_t length, int rank, int world_size, std::size_t slot_bytes,
                               double timeout_s, std::string name_prefix)
    : base_(base),
      length_(length),
      rank_(rank),
      world_(world_size),
      slot_bytes_(slot_bytes),
      timeout_s_(timeout_s),
      name_prefix_(std::move(name_prefix)),
      peer_seen_alive_(static_cast<std::size_t>(world_size), false) {
  // A peer is only ever declared gone after it was seen alive: in separate pid namespaces nobody is visible.
  for (int peer = 0; peer < world_; ++peer) {
    const std::int32_t pid = signal(peer).pid.load();
    peer_seen_alive_[static_cast<std::size_t>(peer)] =
        peer != rank_ && pid > 0 && peer_liveness(pid) == ProcessState::kAlive;
  }
}

ShmReduceGroup::~ShmReduceGroup() { munmap(base_, length_); }

ShmReduceGroup::RankSignal& ShmReduceGroup::signal(int rank) const {
  return reinterpret_cast<RankSignal*>(static_cast<char*>(base_) + 64)[rank];
}

char* ShmReduceGroup::slot(int rank, std::uint32_t generation) const {
  const std::size_t index = static_cast<std::size_t>(rank) * 2 + (generation & 1u);
  return static_cast<char*>(base_) + data_offset_for(world_) + index * slot_bytes_;
}

void ShmReduceGroup::abort() {
  aborted_.store(true);
  for (int r = 0; r < world_; ++r) futex_wake_all(&signal(r).arrived);
}

void ShmReduceGroup::publish(std::uint32_t generation) {
  RankSignal& mine = signal(rank_);
  mine.arrived.store(generation);
  if (mine.waiters.load() > 0) futex_wake_all(&mine.arrived);
}

void ShmReduceGroup::check_peer_alive(int peer, std::uint32_t generation) {
  const std::int32_t pid = signal(peer).pid.load();
  if (pid <= 0) return;
  const ProcessState state = peer_liveness(pid);
  if (state == ProcessState::kAlive) {
    peer_seen_alive_[static_cast<std::size_t>(peer)] = true;
  } else if (state == ProcessState::kGone && peer_seen_alive_[static_cast<std::size_t>(peer)]) {
    // Seen alive before and gone now (not merely invisible from another pid namespace): it exited or was killed.
    throw Error(
        fmt::format("shared-memory all-reduce on rank {}: local rank {} (pid {}) exited before reaching operation {}; "
                    "see that rank's log for why",
                    rank_, peer, pid, generation));
  }
}

void ShmReduceGroup::wait_for_generation(std::uint32_t generation) {
  const auto deadline = Clock::now() + steady_seconds(timeout_s_);
  for (int peer = 0; peer < world_; ++peer) {
    if (peer == rank_) continue;
    RankSignal& s = signal(peer);
    // Poll while that pays off (spin_budget.hpp), then sleep on the peer's futex word.
    bool done = spin_.spin([&] { return reached(s.arrived.load(std::memory_order_acquire), generation); });
    while (!done) {
      if (aborted_.load()) throw Error("shared-memory all-reduce: the communicator is shutting down");
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) {
        std::string missing;
        for (int r = 0; r < world_; ++r) {
          if (r == rank_ || reached(signal(r).arrived.load(), generation)) continue;
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
        throw Error(
            fmt::format("shared-memory all-reduce on rank {}: local rank(s) {} did not reach operation {} within "
                        "{} s (ddp.timeout_s); did that process die or hang?",
                        rank_, missing, generation, timeout_s_));
      }
      s.waiters.fetch_add(1);
      const std::uint32_t seen = s.arrived.load();
      const auto slice = std::min<Clock::duration>(left, kLivenessCheckInterval);
      if (!reached(seen, generation))
        futex_wait(&s.arrived, seen, std::chrono::duration_cast<std::chrono::nanoseconds>(slice));
      s.waiters.fetch_sub(1);
      done = reached(s.arrived.load(std::memory_order_acquire), generation);
      if (!done) check_peer_alive(peer, generation);
    }
  }
}

namespace {

template <typename T>
void sum_slots(T* out, const std::vector<const T*>& slots, std::int64_t count) {
  // The same order of additions on every rank, so all ranks get bit-identical sums.
  if (slots.size() == 1) {
    std::memcpy(out, slots[0], static_cast<std::size_t>(count) * sizeof(T));
    return;
  }
  const T* a = slots[0];
  const T* b = slots[1];
  for (std::int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
  for (std::size_t k = 2; k < slots.size(); ++k) {
    const T* c = slots[k];
    for (std::int64_t i = 0; i < count; ++i) out[i] += c[i];
  }
}

}  // namespace

void ShmReduceGroup::reduce_chunk(const at::Tensor& tensor, std::int64_t offset, std::int64_t count) {
  const std::uint32_t generation = ++generation_;
  const std::size_t element = tensor.element_size();
  char* data = static_cast<char*>(tensor.data_ptr()) + static_cast<std::size_t>(offset) * element;
  std::memcpy(slot(rank_, generation), data, static_cast<std::size_t>(count) * element);
  publish(generation);
  wait_for_generation(generation);
  if (tensor.scalar_type() == at::kFloat) {
    std::vector<const float*> slots;
    for (int r = 0; r < world_; ++r) slots.push_back(reinterpret_cast<const float*>(slot(r, generation)));
    sum_slots(reinterpret_cast<float*>(data), slots, count);
  } else {
    std::vector<const double*> slots;
    for (int r = 0; r < world_; ++r) slots.push_back(reinterpret_cast<const double*>(slot(r, generation)));
    sum_slots(reinterpret_cast<double*>(data), slots, count);
  }
}

void ShmReduceGroup::allreduce_sum(const at::Tensor& tensor) {
  if (aborted_.load()) throw Error("shared-memory all-reduce: the communicator is shutting down");
  const std::int64_t per_chunk = static_cast<std::int64_t>(slot_bytes_ / tensor.element_size());
  const std::int64_t total = tensor.numel();
  for (std::int64_t offset = 0; offset < total; offset += per_chunk)
    reduce_chunk(tensor, offset, std::min(per_chunk, total - offset));
}

ShmReduceGroup::SharedBuffer::~SharedBuffer() { munmap(mapping_base, mapping_length); }

std::shared_ptr<ShmReduceGroup::SharedBuffer> ShmReduceGroup::allocate_shared_buffer(c10d::Store& store,
                                                                                     std::size_t bytes,
                                                                                     double connect_timeout_s) {
  const int id = ++buffers_allocated_;
  const std::size_t stride = round_up(std::max<std::size_t>(bytes, 1), 4096);
  const SegmentShape shape{kBufferMagic, 1, stride, 4096};
  Mapping mapping = rendezvous_segment(store, rank_, world_, fmt::format("mgtrain/shm/buffer/{}", id),
                                       fmt::format("{}-b{}", name_prefix_, id), shape, false, connect_timeout_s);
  if (!mapping.base) return nullptr;
  auto buffer = std::make_shared<SharedBuffer>();
  buffer->mapping_base = mapping.base;
  buffer->mapping_length = mapping.length;
  buffer->bytes = bytes;
  for (int r = 0; r < world_; ++r)
    buffer->regions.push_back(static_cast<char*>(mapping.base) + 4096 + static_cast<std::size_t>(r) * stride);
  return buffer;
}

namespace {

// Sums element range [begin, end) of every rank's region in rank order and writes the result into every
// region, block by block so the sum stays in the cache between the reads and the writes.
template <typename T>
void reduce_share(const std::vector<char*>& regions, std::int64_t begin, std::int64_t end) {
  constexpr std::int64_t kBlock = 4096;  // 16-32 KiB: stays in L1/L2
  T sum[kBlock];
  const std::size_t world = regions.size();
  for (std::int64_t start = begin; start < end; start += kBlock) {
    const std::int64_t n = std::min(kBlock, end - start);
    const T* __restrict a = reinterpret_cast<const T*>(regions[0]) + start;
    if (world == 1) {
      std::memcpy(sum, a, static_cast<std::size_t>(n) * sizeof(T));
    } else {
      const T* __restrict b = reinterpret_cast<const T*>(regions[1]) + start;
      for (std::int64_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
    }
    for (std::size_t r = 2; r < world; ++r) {
      const T* __restrict c = reinterpret_cast<const T*>(regions[r]) + start;
      for (std::int64_t i = 0; i < n; ++i) sum[i] += c[i];
    }
    for (std::size_t r = 0; r < world; ++r)
      std::memcpy(reinterpret_cast<T*>(regions[r]) + start, sum, static_cast<std::size_t>(n) * sizeof(T));
  }
}

}  // namespace

void ShmReduceGroup::allreduce_sum_shared(const SharedBuffer& buffer, c10::ScalarType type, std::int64_t count) {
  if (aborted_.load()) throw Error("shared-memory all-reduce: the communicator is shutting down");
  const std::size_t element = type == c10::ScalarType::Float ? sizeof(float) : sizeof(double);
  if (static_cast<std::size_t>(count) * element > buffer.bytes)
    throw Error("shared-memory all-reduce: tensor larger than its shared buffer");
  // 1. Everyone's gradients are in place.
  const std::uint32_t filled = ++generation_;
  publish(filled);
  wait_for_generation(filled);
  // 2. Each rank sums its share (cache-line aligned) over all ranks and writes it back into every region.
  const std::int64_t align = 64 / static_cast<std::int64_t>(element);
  auto share_start = [&](int r) { return std::min(count, (count * r / world_ + align - 1) / align * align); };
  const std::int64_t begin = share_start(rank_), end = rank_ + 1 == world_ ? count : share_start(rank_ + 1);
  if (type == c10::ScalarType::Float)
    reduce_share<float>(buffer.regions, begin, end);
  else
    reduce_share<double>(buffer.regions, begin, end);
  // 3. Every share is written: each region holds the full sum.
  const std::uint32_t summed = ++generation_;
  publish(summed);
  wait_for_generation(summed);
}

}  // namespace mgtrain
