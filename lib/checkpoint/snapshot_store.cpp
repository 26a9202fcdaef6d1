// Snapshots in a launcher-owned memfd, two slots of checkpoint images (see snapshot_store.hpp).
#include "checkpoint/snapshot_store.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

constexpr char kMagic[8] = {'M', 'G', 'S', 'N', 'A', 'P', '0', '1'};
constexpr std::uint32_t kLayoutVersion = 1;
constexpr std::uint64_t kSlotTableAt = 64;
constexpr std::uint64_t kSlotEntryBytes = 64;
constexpr std::uint64_t kPage = 4096;

enum SlotState : std::uint32_t { kEmpty = 0, kWriting = 1, kComplete = 2 };

std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One slot's entry in the header: its fields in place (page-aligned mapping: every field is naturally aligned); the
// state is read and written with acquire/release order, so a complete state is seen only after the rest.
struct SnapshotStore::SlotView {
  unsigned char* at;
  std::uint32_t* state() const { return reinterpret_cast<std::uint32_t*>(at); }
  std::uint64_t* generation() const { return reinterpret_cast<std::uint64_t*>(at + 8); }
  std::int64_t* step() const { return reinterpret_cast<std::int64_t*>(at + 16); }
  std::uint64_t* bytes() const { return reinterpret_cast<std::uint64_t*>(at + 24); }
  std::uint64_t* offset() const { return reinterpret_cast<std::uint64_t*>(at + 32); }
  std::uint64_t* capacity() const { return reinterpret_cast<std::uint64_t*>(at + 40); }
  std::int64_t* written_unix_ms() const { return reinterpret_cast<std::int64_t*>(at + 48); }
  std::uint32_t load_state() const { return __atomic_load_n(state(), __ATOMIC_ACQUIRE); }
  void store_state(std::uint32_t value) const { __atomic_store_n(state(), value, __ATOMIC_RELEASE); }
};

Fd SnapshotStore::create(const std::string& name) {
  Fd fd(::memfd_create(name.c_str(), MFD_CLOEXEC));
  if (!fd) throw SystemError(fmt::format("memfd_create {}", name), errno);
  return fd;
}

SnapshotStore::SnapshotStore(int fd, std::string name) : fd_(fd), name_(std::move(name)) {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) throw SystemError(fmt::format("stat {}", name_), errno);
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size == 0) {  // a new store: its header
    grow(kHeaderBytes);
    std::memcpy(data_, kMagic, sizeof kMagic);
    std::memcpy(data_ + 8, &kLayoutVersion, sizeof kLayoutVersion);
    const std::uint32_t slots = kSlots;
    std::memcpy(data_ + 12, &slots, sizeof slots);
    return;
  }
  if (size < kHeaderBytes) {
    throw Error(
        fmt::format("{}: {} bytes, less than its {}-byte header (not a snapshot store)", name_, size, kHeaderBytes));
  }
  map(size);
  std::uint32_t version = 0, slots = 0;
  std::memcpy(&version, data_ + 8, sizeof version);
  std::memcpy(&slots, data_ + 12, sizeof slots);
  if (std::memcmp(data_, kMagic, sizeof kMagic) != 0 || version != kLayoutVersion || slots != kSlots) {
    throw Error(fmt::format("{}: not a snapshot store of layout {} with {} slots", name_, kLayoutVersion, kSlots));
  }
}

SnapshotStore::~SnapshotStore() {
  if (data_) ::munmap(data_, size_);
}

void SnapshotStore::map(std::uint64_t size) {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (mapped == MAP_FAILED) throw SystemError(fmt::format("mmap {} ({} bytes)", name_, size), errno);
  data_ = static_cast<unsigned char*>(mapped);
  size_ = size;
}

void SnapshotStore::grow(std::uint64_t size) {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) throw SystemError(fmt::format("stat {}", name_), errno);
  if (static_cast<std::uint64_t>(info.st_size) < size && ::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    throw SystemError(fmt::format("grow {} to {} bytes", name_, size), errno);
  }
  const std::uint64_t now = std::max<std::uint64_t>(size, static_cast<std::uint64_t>(info.st_size));
  if (!data_ || now != size_) map(now);  // a new mapping only when the size changed: the pages stay mapped
}

SnapshotStore::SlotView SnapshotStore::slot(int index) const {
  return SlotView{data_ + kSlotTableAt + static_cast<std::uint64_t>(index) * kSlotEntryBytes};
}

void SnapshotStore::write(std::int64_t step, std::uint64_t bytes,
                          const std::function<void(unsigned char* room)>& fill) {
  fill(begin_write(bytes));
  complete_write(step, unix_ms_now());
}

unsigned char* SnapshotStore::begin_write(std::uint64_t bytes) {
  grow(size_);  // another process (an earlier worker) may have grown the file: see all of it
  // The slot not holding the newest complete snapshot (the older, or one never completed).
  int target = 0;
  std::uint64_t newest_generation = 0;
  for (int i = 0; i < kSlots; ++i) {
    const SlotView view = slot(i);
    if (view.load_state() == kComplete && *view.generation() >= newest_generation) {
      newest_generation = *view.generation();
      target = 1 - i;
    }
  }
  SlotView view = slot(target);
  view.store_state(kWriting);
  if (*view.capacity() < bytes) {  // a region of its own at the end, large enough
    const std::uint64_t offset = round_up(size_, kPage);
    const std::uint64_t capacity = round_up(std::max<std::uint64_t>(bytes, 1), kPage);
    grow(offset + capacity);
    view = slot(target);  // remapped
    *view.offset() = offset;
    *view.capacity() = capacity;
  }
  *view.bytes() = bytes;
  writing_ = target;
  writing_generation_ = newest_generation + 1;
  return data_ + *view.offset();
}

void SnapshotStore::complete_write(std::int64_t step, std::int64_t written_unix_ms) {
  if (writing_ < 0) throw Error(fmt::format("{}: internal error: complete_write without begin_write", name_));
  const SlotView view = slot(writing_);
  *view.step() = step;
  *view.written_unix_ms() = written_unix_ms;
  *view.generation() = writing_generation_;
  view.store_state(kComplete);
  writing_ = -1;
}

std::optional<SnapshotStore::Latest> SnapshotStore::latest() {
  std::optional<Latest> found;
  for (int i = 0; i < kSlots; ++i) {
    const std::optional<Latest> one = contents(i);
    if (one && (!found || one->generation > found->generation)) found = one;
  }
  return found;
}

std::optional<SnapshotStore::Latest> SnapshotStore::contents(int index) {
  grow(size_);
  const SlotView view = slot(index);
  if (view.load_state() != kComplete) return std::nullopt;
  if (*view.offset() < kHeaderBytes || *view.offset() > size_ || *view.bytes() > size_ - *view.offset()) {
    return std::nullopt;
  }
  return Latest{index,        *view.step(), *view.generation(), *view.written_unix_ms(), data_ + *view.offset(),
                *view.bytes()};
}

bool SnapshotStore::holds(int index, std::uint64_t generation) const {
  std::atomic_thread_fence(std::memory_order_acquire);
  const SlotView view = slot(index);
  return view.load_state() == kComplete && *view.generation() == generation;
}

std::optional<SnapshotStore::Snapshot> SnapshotStore::newest(std::vector<std::string>& skipped) {
  grow(size_);
  std::vector<int> complete;
  for (int i = 0; i < kSlots; ++i) {
    if (slot(i).load_state() == kComplete) complete.push_back(i);
  }
  std::sort(complete.begin(), complete.end(),
            [&](int a, int b) { return *slot(a).generation() > *slot(b).generation(); });
  for (int index : complete) {
    const SlotView view = slot(index);
    const std::string what = fmt::format("{}, slot {} (step {})", name_, index, *view.step());
    if (*view.offset() < kHeaderBytes || *view.offset() > size_ || *view.bytes() > size_ - *view.offset() ||
        *view.bytes() > *view.capacity()) {
      skipped.push_back(fmt::format("{}: its region [{}, +{}) is outside the store's {} bytes", what, *view.offset(),
                                    *view.bytes(), size_));
      continue;
    }
    try {
      Snapshot snapshot{index,
                        *view.step(),
                        *view.generation(),
                        *view.written_unix_ms(),
                        *view.offset(),
                        read_checkpoint_image(what, data_ + *view.offset(), *view.bytes())};
      return snapshot;
    } catch (const Error& error) {
      skipped.push_back(error.what());
    }
  }
  return std::nullopt;
}

}  // namespace mgtrain
