// Snapshots in memory that a worker's crash cannot reach (issue 37): a memfd that the launcher creates for a worker
// and keeps across the worker's restarts, holding two slots, each a checkpoint image (checkpoint_file.hpp: the exact
// bytes of a checkpoint file, checksum included) with its step and a generation. A worker writes into the slot that
// does not hold the newest complete image, marks it complete only once every byte is in, and so a crash mid-write
// leaves the previous snapshot whole; a reader takes the newest complete slot whose image verifies. Torch-free: the
// launcher creates and keeps the store, the trainer fills it, either can read it.
//
// Layout (little-endian, this machine's processes only): a 4096-byte header, "MGSNAP01", the layout version, then per
// slot: state (0 empty, 1 being written, 2 complete), generation, step, image bytes, where its region starts and how
// large it is, and the wall-clock time it was completed. A slot that needs more room than its region gets a new one at
// the end of the file (the file only grows, by at most what the largest image needs twice).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "util/fd.hpp"

namespace mgtrain {

class SnapshotStore {
 public:
  static constexpr int kSlots = 2;
  static constexpr std::uint64_t kHeaderBytes = 4096;

  // A new empty store (a memfd named `name`, close-on-exec): the launcher keeps it and hands a duplicate to each
  // worker it starts. Throws SystemError when memfd_create fails.
  static Fd create(const std::string& name);

  // The store behind `fd` (not owned; it must stay open while this object lives); `name` names it in messages ("the
  // snapshot store of rank 3"). An empty file gets its header; anything else must be a store of this layout, else
  // Error naming it.
  SnapshotStore(int fd, std::string name);
  ~SnapshotStore();
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  // Writes a snapshot of `step`: `fill` gets `bytes` bytes of room in the slot not holding the newest complete
  // snapshot and writes the image there (CheckpointImage::write); the slot is marked complete afterwards. A crash
  // before that leaves the slot "being written", which no reader takes.
  void write(std::int64_t step, std::uint64_t bytes, const std::function<void(unsigned char* room)>& fill);
  // The same in two parts, for bytes that arrive piece by piece (a replica from another node): begin_write marks the
  // target slot "being written" and returns `bytes` bytes of room (valid until the next begin_write, newest() or
  // latest()); complete_write marks it complete with `step` and the time the snapshot was taken.
  unsigned char* begin_write(std::uint64_t bytes);
  void complete_write(std::int64_t step, std::int64_t written_unix_ms);

  struct Snapshot {
    int slot = 0;
    std::int64_t step = 0;
    std::uint64_t generation = 0;
    std::int64_t written_unix_ms = 0;
    std::uint64_t offset = 0;  // where its image starts in the store
    CheckpointFile image;      // over the slot's bytes: valid until this store's next write() or newest(), or its end
  };
  // The newest complete snapshot whose image verifies; a complete slot that does not verify is skipped, and why goes
  // into `skipped` ("<name>, slot 1 (step 400): <what is wrong>").
  std::optional<Snapshot> newest(std::vector<std::string>& skipped);

  // The newest complete slot as its header says, unverified and without reading its image (cheap: a sender polls
  // it): its step, generation and time, and its bytes (valid until this store's next write, newest(), latest() or
  // contents()). Unset when no slot is complete or its region lies outside the store. contents: one slot's.
  struct Latest {
    int slot = 0;
    std::int64_t step = 0;
    std::uint64_t generation = 0;
    std::int64_t written_unix_ms = 0;
    const unsigned char* data = nullptr;
    std::uint64_t bytes = 0;
  };
  std::optional<Latest> latest();
  std::optional<Latest> contents(int slot);
  // Whether `slot` still holds that generation, complete (after copying from Latest::data: an acquire fence first,
  // so a "yes" means the copied bytes were that generation's).
  bool holds(int slot, std::uint64_t generation) const;

  // The store's size in bytes as this object maps it (the memory it holds).
  std::uint64_t size() const { return size_; }

 private:
  struct SlotView;
  void map(std::uint64_t size);
  void grow(std::uint64_t size);
  SlotView slot(int index) const;

  int fd_;
  std::string name_;
  int writing_ = -1;  // the slot begin_write marked, until complete_write
  std::uint64_t writing_generation_ = 0;
  unsigned char* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace mgtrain
