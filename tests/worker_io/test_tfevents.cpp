// TensorBoard event files: CRC32C against published vectors, then the writer's file read back record by
// record with a reader of our own — both masked CRCs of every record, the protobuf fields of every Event
// (file_version first, then the scalars with their steps, wall times and values).
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/directory_listing.hpp"
#include "support/temp_dir.hpp"
#include "support/tfevents_reader.hpp"
#include "worker_io/crc32c.hpp"
#include "worker_io/tfevents_writer.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;
namespace fs = std::filesystem;

namespace {}  // namespace

TEST_CASE("crc32c matches the published Castagnoli vectors", "[tfevents]") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720 B.4
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  CHECK(crc32c(ascending) == 0x46DD794Eu);
  CHECK(crc32c("56789", crc32c("1234")) == 0xE3069283u);  // continues an earlier CRC
  const std::uint32_t crc = crc32c("123456789");
  CHECK(masked_crc32c("123456789") == ((crc >> 15 | crc << 17) + 0xa282ead8u));
}

TEST_CASE("an event file reads back: version record, scalars, both CRCs of every record", "[tfevents]") {
  const testing::TempDir dir("mgtrain-tfevents");
  std::string path;
  {
    TfEventsWriter writer(dir / "tensorboard");
    path = writer.path();
    writer.add_scalars(10, {{"train/loss", 2.25f}, {"train/lr", 0.01f}, {"train/samples_per_s", 5012.5f}},
                       1763800000.25);
    writer.add_scalars(20, {{"train/loss", 1.5f}}, 1763800001.5);
    writer.add_scalars(300, {{"eval/loss", 0.41f}, {"eval/accuracy", 0.86f}}, 1763800002.0);
    writer.add_scalars(400, {}, 1763800003.0);  // nothing to write: no record
  }
  const fs::path file(path);
  CHECK(file.parent_path() == fs::path(dir / "tensorboard"));
  const std::string name = file.filename().string();
  CHECK(name.rfind("events.out.tfevents.", 0) == 0);
  CHECK(name.substr(name.size() - std::to_string(getpid()).size()) == std::to_string(getpid()));

  const std::vector<std::string> records = read_records(testing::read_all(file));
  REQUIRE(records.size() == 4);
  const DecodedEvent version = decode_event(records[0]);
  CHECK(version.file_version == "brain.Event:2");
  CHECK(version.wall_time > 1.7e9);
  CHECK(version.scalars.empty());

  const DecodedEvent first = decode_event(records[1]);
  CHECK(first.step == 10);
  CHECK(first.wall_time == 1763800000.25);
  REQUIRE(first.scalars.size() == 3);
  CHECK(first.scalars[0].tag == "train/loss");
  CHECK(first.scalars[0].value == 2.25f);
  CHECK(first.scalars[1].tag == "train/lr");
  CHECK(first.scalars[1].value == 0.01f);
  CHECK(first.scalars[2].tag == "train/samples_per_s");
  CHECK(first.scalars[2].value == 5012.5f);
  const DecodedEvent second = decode_event(records[2]);
  CHECK(second.step == 20);
  REQUIRE(second.scalars.size() == 1);
  CHECK(second.scalars[0].value == 1.5f);
  const DecodedEvent eval = decode_event(records[3]);
  CHECK(eval.step == 300);
  REQUIRE(eval.scalars.size() == 2);
  CHECK(eval.scalars[1].tag == "eval/accuracy");
  CHECK(eval.scalars[1].value == 0.86f);
}

TEST_CASE("the reader catches a flipped byte in a record's data or length", "[tfevents]") {
  const std::string good = frame_tfrecord(encode_scalars_event(1.0, 5, {{"train/loss", 0.5f}})) +
                           frame_tfrecord(encode_scalars_event(2.0, 6, {{"train/loss", 0.25f}}));
  CHECK(read_records(good).size() == 2);
  std::string bad_data = good;
  bad_data[good.size() - 6] ^= 0x01;  // inside the second record's data
  CHECK_THROWS_WITH(read_records(bad_data), "record 1: data CRC mismatch");
  std::string bad_length = good;
  bad_length[0] ^= 0x01;
  CHECK_THROWS_WITH(read_records(bad_length), "record 0: length CRC mismatch");
  CHECK_THROWS_WITH(read_records(good.substr(0, good.size() - 1)), "record 1: truncated data");
}

TEST_CASE("an event's bytes are the protobuf encoding TensorBoard expects", "[tfevents]") {
  // Hand-assembled: wall_time (field 1, fixed64) 1.0, step (field 2, varint) 300, summary (field 5) with
  // one value {tag (1) "a", simple_value (2, fixed32) 1.0f}.
  const std::string expected = std::string("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9) + "\x10\xac\x02" +
                               std::string(
                                   "\x2a\x0a\x0a\x08\x0a\x01"
                                   "a"
                                   "\x15\x00\x00\x80\x3f",
                                   12);
  CHECK(encode_scalars_event(1.0, 300, {{"a", 1.0f}}) == expected);
  CHECK(encode_file_version_event(1.0, "brain.Event:2") ==
        std::string("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9) + "\x1a\x0d" + "brain.Event:2");
}
