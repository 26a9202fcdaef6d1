// The snapshot store (checkpoint/snapshot_store.hpp) with real processes: snapshots alternate between two slots, the
// newest verified one is read back by another process after its writer was SIGKILLed, a writer killed in the middle
// of a snapshot leaves the previous one whole, a damaged slot is skipped with its reason, a slot grows when an image
// outgrows it, and a file that is not a store is refused by name.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/snapshot_store.hpp"
#include "support/checkpoint_test_data.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;

namespace {

// Runs `body` in a child process that shares the store's descriptor, and waits for it; its wait status.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("snapshot store: snapshots alternate between the slots, the newest is read back", "[snapshot_store]") {
  const Fd fd = SnapshotStore::create("test-store");
  SnapshotStore store(fd.get(), "test-store");
  std::vector<std::string> skipped;
  CHECK_FALSE(store.newest(skipped).has_value());
  const testing::TestCheckpoint a = testing::make_test_checkpoint(100, 0.2),
                                b = testing::make_test_checkpoint(200, 0.2),
                                c = testing::make_test_checkpoint(300, 0.2);
  testing::put_snapshot(store, 100, a);
  auto first = store.newest(skipped);
  REQUIRE(first);
  CHECK(first->step == 100);
  CHECK(first->slot == 0);
  CHECK(testing::compare_with_checkpoint(first->image, a) == "");
  testing::put_snapshot(store, 200, b);
  testing::put_snapshot(store, 300, c);  // over the older of the two: step 100's slot
  auto third = store.newest(skipped);
  REQUIRE(third);
  CHECK(third->step == 300);
  CHECK(third->slot == 0);
  CHECK(third->generation == 3);
  CHECK(testing::compare_with_checkpoint(third->image, c) == "");
  CHECK(skipped.empty());
}

TEST_CASE("snapshot store: a snapshot outlives the process that wrote it", "[snapshot_store]") {
  const Fd fd = SnapshotStore::create("test-store");  // the launcher's
  const testing::TestCheckpoint checkpoint = testing::make_test_checkpoint(400, 0.5);
  const int status = in_child([&] {  // the worker: writes, then dies by SIGKILL
    SnapshotStore store(fd.get(), "worker's view");
    testing::put_snapshot(store, 400, checkpoint);
    raise(SIGKILL);
  });
  REQUIRE(WIFSIGNALED(status));
  SnapshotStore store(fd.get(), "test-store");
  std::vector<std::string> skipped;
  auto newest = store.newest(skipped);
  REQUIRE(newest);
  CHECK(newest->step == 400);
  CHECK(testing::compare_with_checkpoint(newest->image, checkpoint) == "");
}

TEST_CASE("snapshot store: a writer killed in the middle of a snapshot leaves the previous one whole",
          "[snapshot_store]") {
  const Fd fd = SnapshotStore::create("test-store");
  const testing::TestCheckpoint before = testing::make_test_checkpoint(100, 0.3),
                                during = testing::make_test_checkpoint(200, 0.3);
  {
    SnapshotStore store(fd.get(), "test-store");
    testing::put_snapshot(store, 100, before);
  }
  const int status = in_child([&] {
    SnapshotStore store(fd.get(), "worker's view");
    const std::uint64_t size = CheckpointImage("during", during.metadata, during.records).size();
    store.write(200, size, [&](unsigned char* room) {
      std::memset(room, 0x5A, size / 2);  // half an image, then the end
      raise(SIGKILL);
    });
  });
  REQUIRE(WIFSIGNALED(status));
  SnapshotStore store(fd.get(), "test-store");
  std::vector<std::string> skipped;
  auto newest = store.newest(skipped);
  REQUIRE(newest);
  CHECK(newest->step == 100);
  CHECK(testing::compare_with_checkpoint(newest->image, before) == "");
  CHECK(skipped.empty());                     // a slot being written is no snapshot at all
  testing::put_snapshot(store, 300, during);  // the next write goes into the slot the killed writer left
  newest = store.newest(skipped);
  REQUIRE(newest);
  CHECK(newest->step == 300);
  CHECK(newest->slot == 1);
}

TEST_CASE("snapshot store: a damaged snapshot is skipped with its reason, the other one used", "[snapshot_store]") {
  const Fd fd = SnapshotStore::create("test-store");
  SnapshotStore store(fd.get(), "test-store");
  testing::put_snapshot(store, 100, testing::make_test_checkpoint(100, 0.1));
  testing::put_snapshot(store, 200, testing::make_test_checkpoint(200, 0.1));
  std::vector<std::string> skipped;
  auto newest = store.newest(skipped);
  REQUIRE(newest);
  REQUIRE(newest->step == 200);
  // One byte of the newest image flipped through a mapping of its own (memory going bad, a stray write).
  void* other = mmap(nullptr, store.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  REQUIRE(other != MAP_FAILED);
  static_cast<unsigned char*>(other)[newest->offset + newest->image.file_size() - 1] ^= 0x01;
  munmap(other, store.size());
  newest = store.newest(skipped);
  REQUIRE(newest);
  CHECK(newest->step == 100);
  REQUIRE(skipped.size() == 1);
  CHECK_THAT(skipped[0], Contains("test-store, slot 1 (step 200)") && Contains("checksum mismatch"));
}

TEST_CASE("snapshot store: a slot grows when an image outgrows it", "[snapshot_store]") {
  const Fd fd = SnapshotStore::create("test-store");
  SnapshotStore store(fd.get(), "test-store");
  testing::put_snapshot(store, 1, testing::make_test_checkpoint(1, 0.05));
  testing::put_snapshot(store, 2, testing::make_test_checkpoint(2, 0.05));
  const std::uint64_t small = store.size();
  const testing::TestCheckpoint large = testing::make_test_checkpoint(3, 2.0);
  testing::put_snapshot(store, 3, large);
  CHECK(store.size() > small);
  std::vector<std::string> skipped;
  auto newest = store.newest(skipped);
  REQUIRE(newest);
  CHECK(newest->step == 3);
  CHECK(testing::compare_with_checkpoint(newest->image, large) == "");
  testing::put_snapshot(store, 4,
                        testing::make_test_checkpoint(4, 0.05));  // the small one again, into step 2's old slot
  newest = store.newest(skipped);
  REQUIRE(newest);
  CHECK(newest->step == 4);
  CHECK(skipped.empty());
}

TEST_CASE("snapshot store: a file that is not a store is refused, naming it", "[snapshot_store]") {
  const Fd tiny = SnapshotStore::create("tiny");
  REQUIRE(write(tiny.get(), "0123456789", 10) == 10);
  CHECK_THROWS_WITH(SnapshotStore(tiny.get(), "tiny"), Contains("tiny: 10 bytes, less than its 4096-byte header"));
  const Fd other = SnapshotStore::create("other");
  const std::string junk(5000, 'x');
  REQUIRE(write(other.get(), junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
  CHECK_THROWS_WITH(SnapshotStore(other.get(), "other"), Contains("other: not a snapshot store"));
}

TEST_CASE(
    "snapshot store: latest() reads the headers only, holds() sees a slot being rewritten, a copy arrives in "
    "pieces",
    "[snapshot_store]") {
  const Fd fd = SnapshotStore::create("origin");
  SnapshotStore origin(fd.get(), "origin");
  CHECK_FALSE(origin.latest().has_value());
  const testing::TestCheckpoint a = testing::make_test_checkpoint(10, 0.2), b = testing::make_test_checkpoint(20, 0.2);
  testing::put_snapshot(origin, 10, a);
  testing::put_snapshot(origin, 20, b);
  const std::optional<SnapshotStore::Latest> latest = origin.latest();
  REQUIRE(latest);
  CHECK(latest->step == 20);
  CHECK(latest->slot == 1);
  CHECK(latest->generation == 2);
  CHECK(latest->written_unix_ms > 0);
  CHECK(origin.holds(latest->slot, latest->generation));

  // The copy, in three pieces, into another store: complete and verified only after complete_write.
  const Fd copy_fd = SnapshotStore::create("copy");
  SnapshotStore copy(copy_fd.get(), "copy");
  std::vector<unsigned char> bytes(latest->data, latest->data + latest->bytes);
  unsigned char* room = copy.begin_write(bytes.size());
  const std::size_t third = bytes.size() / 3;
  std::memcpy(room, bytes.data(), third);
  std::vector<std::string> skipped;
  CHECK_FALSE(copy.newest(skipped).has_value());  // being written: nobody takes it
  std::memcpy(room + third, bytes.data() + third, bytes.size() - third);
  copy.complete_write(latest->step, latest->written_unix_ms);
  const auto copied = copy.newest(skipped);
  REQUIRE(copied);
  CHECK(copied->step == 20);
  CHECK(copied->written_unix_ms == latest->written_unix_ms);
  CHECK(testing::compare_with_checkpoint(copied->image, b) == "");
  CHECK(skipped.empty());
  CHECK_THROWS_AS(copy.complete_write(30, 0), Error);  // no write begun

  // The worker's next snapshot goes into the older slot; the one after rewrites the slot a sender was copying.
  testing::put_snapshot(origin, 30, a);
  CHECK(origin.holds(latest->slot, latest->generation));
  const unsigned char* unused = origin.begin_write(latest->bytes);
  CHECK(unused != nullptr);
  CHECK_FALSE(origin.holds(latest->slot, latest->generation));
}
