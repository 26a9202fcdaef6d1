// Checkpoint files: round trips, the exact safetensors layout (read back independently, and by Python's json
// module), deterministic bytes, input validation, and detection of every single-byte flip and every truncation.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.hpp"
#include "process/run_capture.hpp"
#include "support/checkpoint_test_data.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_all(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string hex(const void* data, std::size_t size) {
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) out += fmt::format("{:02x}", p[i]);
  return out;
}
std::string hex(const std::string& text) { return hex(text.data(), text.size()); }

std::uint64_t le64(const std::string& bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return value;
}

// Every dtype, zero-size and scalar tensors, and names that need JSON escaping or look like YAML syntax.
testing::TestCheckpoint tricky_checkpoint() {
  testing::TestCheckpoint checkpoint;
  checkpoint.metadata = {{"config", "model:\n  type: \"mlp\"\n  widths: [1, 2]\n"},
                         {"empty", ""},
                         {"unicode key \xc3\xa9", "value \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82"},
                         {"mgtrain.version", "0.1.0"}};
  const std::vector<std::string> names = {
      "plain.weight",
      "unicode \xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82",
      "quote\" backslash\\ slash/",
      "newline\n tab\t cr\r",
      "control \x01\x1f del \x7f",
      "c1 \xc2\x80 \xc2\x9f nel \xc2\x85 bom \xef\xbb\xbf nonchar \xef\xbf\xbf",
      "yaml: - [x] {y} #z &a *b !c |d >e %f @g `h ,i ?j",
      "   spaces around   ",
      "1234",
      "null",
      "true",
      "~",
      std::string(990, 'n') + ".long",  // long names up to the limit of 1000 bytes JSON-escaped
  };
  const std::vector<std::pair<std::string, std::size_t>> dtypes = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},
                                                                   {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
                                                                   {"U8", 1},  {"BOOL", 1}};
  const std::vector<std::vector<std::int64_t>> shapes = {{3}, {2, 3}, {}, {0}, {1, 1, 5}, {4, 0, 2}, {7}};
  checkpoint.buffers.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& [dtype, element_size] = dtypes[i % dtypes.size()];
    const auto& shape = shapes[i % shapes.size()];
    std::size_t nbytes = element_size;
    for (auto dim : shape) nbytes *= static_cast<std::size_t>(dim);
    checkpoint.buffers.emplace_back(nbytes);
    testing::fill_test_bytes(checkpoint.buffers.back(), 100 + i);
    if (dtype == "BOOL")
      for (auto& byte : checkpoint.buffers.back()) byte &= 1;
    checkpoint.records.push_back({names[i], dtype, shape, nbytes ? checkpoint.buffers.back().data() : nullptr, nbytes});
  }
  return checkpoint;
}

// An Error's message, or "" when `body` does not throw one.
template <typename Body>
std::string error_of(Body body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("checkpoint file: round trip of dtypes, shapes, zero-size tensors and metadata", "[checkpoint][file]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-roundtrip");
  const fs::path dir = temp_dir.path();
  for (const auto& checkpoint : {testing::make_test_checkpoint(7, 0.3), tricky_checkpoint()}) {
    const std::string path = (dir / "c.safetensors").string();
    write_checkpoint_file(path, checkpoint.metadata, checkpoint.records);
    const CheckpointFile file = read_checkpoint_file(path);
    CHECK(testing::compare_with_checkpoint(file, checkpoint) == "");
    CHECK(file.path() == path);
    CHECK(file.file_size() == fs::file_size(path));
    for (const TensorRecord& record : checkpoint.records) {
      const TensorEntry* entry = file.find(record.name);
      REQUIRE(entry);
      CHECK(entry->nbytes == record.nbytes);
    }
    CHECK(file.find("no such tensor") == nullptr);
    CHECK(verify_checkpoint_file(path) == "");
  }
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // no temp file left
}

TEST_CASE("checkpoint file: many tensors, and no tensors at all", "[checkpoint][file]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-many");
  const fs::path dir = temp_dir.path();
  testing::TestCheckpoint checkpoint;
  checkpoint.buffers.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    checkpoint.buffers.emplace_back(static_cast<std::size_t>(4 * (i % 17)));
    testing::fill_test_bytes(checkpoint.buffers.back(), static_cast<std::uint64_t>(i));
    checkpoint.records.push_back({fmt::format("layers.{}.weight", i),
                                  "F32",
                                  {i % 17},
                                  checkpoint.buffers.back().data(),
                                  checkpoint.buffers.back().size()});
  }
  write_checkpoint_file((dir / "many").string(), {{"k", "v"}}, checkpoint.records);
  checkpoint.metadata = {{"k", "v"}};
  CHECK(testing::compare_with_checkpoint(read_checkpoint_file((dir / "many").string()), checkpoint) == "");

  write_checkpoint_file((dir / "none").string(), {}, {});
  const CheckpointFile none = read_checkpoint_file((dir / "none").string());
  CHECK(none.tensors().empty());
  CHECK(none.metadata().empty());
}

TEST_CASE("checkpoint file: the exact bytes are the safetensors layout, deterministic", "[checkpoint][file]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-layout");
  const fs::path dir = temp_dir.path();
  const float values[2] = {1.5f, -2.0f};
  const std::vector<TensorRecord> tensors = {{"x", "F32", {2}, values, sizeof values}, {"e", "U8", {0}, nullptr, 0}};
  write_checkpoint_file((dir / "long").string(), {}, {{std::string(998, 'n'), "F32", {2}, values, sizeof values}});
  CHECK(read_checkpoint_file((dir / "long").string()).tensors().at(0).name == std::string(998, 'n'));
  write_checkpoint_file((dir / "a").string(), {{"b", "c\"d"}, {"a", "1"}}, tensors);
  write_checkpoint_file((dir / "b").string(), {{"a", "1"}, {"b", "c\"d"}}, tensors);
  const std::string bytes = read_all(dir / "a");
  CHECK(bytes == read_all(dir / "b"));

  const std::uint64_t header_size = le64(bytes);
  CHECK((8 + header_size) % 8 == 0);
  CHECK(bytes.size() == 8 + header_size + 8);
  const std::string header = bytes.substr(8, header_size);
  const std::string digits = header.substr(kChecksumDigitsOffsetInHeader, 16);
  const std::string json =
      R"({"__metadata__":{"mgtrain.checksum":")" + digits +
      R"(","mgtrain.format":"1","a":"1","b":"c\"d"},)"
      R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"U8","shape":[0],"data_offsets":[8,8]}})";
  CHECK(header == json + std::string(header_size - json.size(), ' '));
  CHECK(header_size - json.size() < 8);
  CHECK(std::memcmp(bytes.data() + 8 + header_size, values, sizeof values) == 0);
  CHECK(fmt::format("{:016x}", read_checkpoint_file((dir / "a").string()).checksum()) == digits);
}

TEST_CASE("checkpoint file: an independent reader of the safetensors layout agrees", "[checkpoint][file]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-independent");
  const fs::path dir = temp_dir.path();
  const testing::TestCheckpoint checkpoint = tricky_checkpoint();
  const std::string path = (dir / "c.safetensors").string();
  write_checkpoint_file(path, checkpoint.metadata, checkpoint.records);
  const std::string bytes = read_all(path);
  const std::uint64_t header_size = le64(bytes);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_size));
  REQUIRE(header.is_object());
  CHECK(header.size() == checkpoint.records.size() + 1);
  CHECK(header.at("__metadata__").at("mgtrain.format").get<std::string>() == "1");
  for (const auto& [key, value] : checkpoint.metadata)
    CHECK(header.at("__metadata__").at(key).get<std::string>() == value);
  for (const TensorRecord& record : checkpoint.records) {
    INFO(record.name);
    const nlohmann::json& info = header.at(record.name);
    REQUIRE(info.is_object());
    CHECK(info.at("dtype").get<std::string>() == record.dtype);
    CHECK(info.at("shape").get<std::vector<std::int64_t>>() == record.shape);
    const auto offsets = info.at("data_offsets").get<std::vector<std::uint64_t>>();
    REQUIRE(offsets.size() == 2);
    CHECK(offsets[1] - offsets[0] == record.nbytes);
    CHECK(hex(bytes.data() + 8 + header_size + offsets[0], offsets[1] - offsets[0]) == hex(record.data, record.nbytes));
  }
}

TEST_CASE("checkpoint file: Python's json module (and safetensors, when installed) read it",
          "[checkpoint][file][python]") {
  const std::string python = "/usr/bin/python3";
  if (access(python.c_str(), X_OK) != 0) {
    WARN("SKIP: " << python << " not found; the header is checked by the C++ reader only");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-ckpt-python");
  const fs::path dir = temp_dir.path();
  const testing::TestCheckpoint checkpoint = tricky_checkpoint();
  const std::string path = (dir / "c.safetensors").string();
  write_checkpoint_file(path, checkpoint.metadata, checkpoint.records);
  const std::string script = R"(
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
n, = struct.unpack('<Q', data[:8])
header = json.loads(data[8:8 + n].decode('utf-8'))
meta = header.pop('__metadata__')
for key in sorted(meta):
    print('meta', key.encode().hex(), meta[key].encode().hex())
end = 0
for name, info in header.items():
    b, e = info['data_offsets']
    assert b == end, (name, b, end)
    end = e
    print('tensor', name.encode().hex(), info['dtype'], ','.join(map(str, info['shape'])), data[8 + n + b:8 + n + e].hex())
assert 8 + n + end == len(data)
try:
    from safetensors import safe_open
except ImportError:
    print('safetensors missing')
else:
    with safe_open(sys.argv[1], framework='np') as f:
        assert set(f.keys()) == set(header), 'safetensors keys differ'
        assert f.metadata() == meta, 'safetensors metadata differs'
    print('safetensors ok')
)";
  const CapturedRun run = run_and_capture({python, "-c", script, path});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  std::istringstream lines(run.out);
  std::string line;
  std::vector<std::string> meta_lines, tensor_lines;
  std::string safetensors_line;
  while (std::getline(lines, line)) {
    if (line.rfind("meta ", 0) == 0)
      meta_lines.push_back(line);
    else if (line.rfind("tensor ", 0) == 0)
      tensor_lines.push_back(line);
    else
      safetensors_line = line;
  }
  std::map<std::string, std::string> expected_meta = checkpoint.metadata;
  expected_meta["mgtrain.format"] = "1";
  expected_meta["mgtrain.checksum"] = fmt::format("{:016x}", read_checkpoint_file(path).checksum());
  std::vector<std::string> expected_meta_lines;
  for (const auto& [key, value] : expected_meta) expected_meta_lines.push_back("meta " + hex(key) + " " + hex(value));
  std::sort(expected_meta_lines.begin(), expected_meta_lines.end());
  std::sort(meta_lines.begin(), meta_lines.end());
  CHECK(meta_lines == expected_meta_lines);
  std::vector<std::string> expected_tensor_lines;
  for (const TensorRecord& record : checkpoint.records) {
    expected_tensor_lines.push_back(fmt::format("tensor {} {} {} {}", hex(record.name), record.dtype,
                                                fmt::join(record.shape, ","), hex(record.data, record.nbytes)));
  }
  CHECK(tensor_lines == expected_tensor_lines);
  if (safetensors_line == "safetensors missing") {
    WARN("SKIP: the Python safetensors package is not installed; checked with Python's json module only");
  } else {
    CHECK(safetensors_line == "safetensors ok");
  }
}

TEST_CASE("checkpoint file: invalid input is refused before anything is written", "[checkpoint][file]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-invalid");
  const fs::path dir = temp_dir.path();
  const std::string path = (dir / "c").string();
  const float data[6] = {};
  const auto write = [&](std::vector<TensorRecord> tensors, std::map<std::string, std::string> metadata = {}) {
    return error_of([&] { write_checkpoint_file(path, metadata, tensors); });
  };
  CHECK_THAT(write({{"w", "F32", {2, 3}, data, 20}}),
             Contains("write checkpoint " + path + ": tensor \"w\": 20 bytes given, shape [2, 3] of F32 needs 24"));
  CHECK_THAT(write({{"w", "F32", {6}, data, 24}, {"w", "F32", {6}, data, 24}}),
             Contains("two tensors are named \"w\""));
  CHECK_THAT(write({{"", "F32", {6}, data, 24}}), Contains("empty name"));
  CHECK_THAT(write({{"__metadata__", "F32", {6}, data, 24}}), Contains("__metadata__"));
  CHECK_THAT(write({{"w", "float32", {6}, data, 24}}), Contains("unknown dtype \"float32\""));
  CHECK_THAT(write({{"w", "F32", {-1, 6}, data, 24}}), Contains("invalid shape [-1, 6]"));
  CHECK_THAT(write({{"bad \xff utf8", "F32", {6}, data, 24}}), Contains("is not valid UTF-8"));
  CHECK_THAT(write({{"w", "F32", {6}, nullptr, 24}}), Contains("no data"));
  CHECK_THAT(write({{std::string(999, 'n'), "F32", {6}, data, 24}}),
             Contains("is too long (1001 bytes JSON-escaped, at most 1000)"));
  CHECK_THAT(write({}, {{std::string(500, '"'), "v"}}),
             Contains("metadata key") && Contains("is too long (1002 bytes JSON-escaped"));
  CHECK_THAT(write({}, {{"mgtrain.checksum", "0"}}), Contains("metadata key mgtrain.checksum is reserved"));
  CHECK_THAT(write({}, {{"k", "bad \xc3"}}), Contains("not valid UTF-8"));
  CHECK(fs::is_empty(dir));
}

TEST_CASE("checkpoint file: every single-byte flip is detected", "[checkpoint][file][corruption]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-flips");
  const fs::path dir = temp_dir.path();
  const testing::TestCheckpoint checkpoint = testing::make_test_checkpoint(3, 0);
  const std::string good_path = (dir / "good").string(), bad_path = (dir / "bad").string();
  write_checkpoint_file(good_path, checkpoint.metadata, checkpoint.records);
  const std::string good = read_all(good_path);
  const std::uint64_t data_start = 8 + le64(good);
  int undetected = 0;
  for (std::size_t offset = 0; offset < good.size(); ++offset) {
    for (unsigned char mask : {0x01, 0x20, 0x80, 0xff}) {
      std::string bad = good;
      bad[offset] = static_cast<char>(bad[offset] ^ mask);
      write_all(bad_path, bad);
      const std::string message = verify_checkpoint_file(bad_path);
      if (message.empty()) {
        ++undetected;
        UNSCOPED_INFO("undetected: offset " << offset << " mask " << int(mask));
        continue;
      }
      CHECK_THAT(message, StartsWith(bad_path + ": "));
      if (offset >= data_start) CHECK_THAT(message, Contains("checksum mismatch: stored "));
    }
  }
  CHECK(undetected == 0);
}

TEST_CASE("checkpoint file: truncation at every length is detected", "[checkpoint][file][corruption]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-truncation");
  const fs::path dir = temp_dir.path();
  const testing::TestCheckpoint checkpoint = testing::make_test_checkpoint(4, 0);
  const std::string good_path = (dir / "good").string(), bad_path = (dir / "bad").string();
  write_checkpoint_file(good_path, checkpoint.metadata, checkpoint.records);
  const std::string good = read_all(good_path);
  const std::uint64_t header_size = le64(good);
  for (std::size_t length = 0; length < good.size(); ++length) {
    write_all(bad_path, good.substr(0, length));
    const std::string message = verify_checkpoint_file(bad_path);
    INFO("length " << length);
    CHECK_THAT(message, StartsWith(bad_path + ": "));
    if (length == 0)
      CHECK_THAT(message, Contains("empty file (0 bytes)"));
    else if (length < 8)
      CHECK_THAT(message,
                 Contains(fmt::format("truncated: {} bytes, less than the 8-byte header length field", length)));
    else if (length < 8 + header_size)
      CHECK_THAT(message,
                 Contains(fmt::format(
                     "truncated: the header length field says {} bytes of JSON header, the file has {} bytes after it",
                     header_size, length - 8)));
    else
      CHECK_THAT(message, Contains(fmt::format("truncated: the header says {} bytes of tensor data, the file has {}",
                                               checkpoint.data_bytes, length - 8 - header_size)));
  }
  write_all(bad_path, good + "xyz");
  CHECK_THAT(verify_checkpoint_file(bad_path), Contains("3 unexpected bytes after the tensor data"));
}

TEST_CASE("checkpoint file: clear errors for files that are not mgtrain checkpoints",
          "[checkpoint][file][corruption]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-foreign");
  const fs::path dir = temp_dir.path();
  // A text file (a `latest` pointer's content): its first 8 bytes read as an absurd header length.
  const std::string text = (dir / "latest").string();
  write_all(text, "checkpoint-step000000020.safetensors\n");
  CHECK_THAT(verify_checkpoint_file(text),
             StartsWith(text + ": not an mgtrain checkpoint (the header length field says ") &&
                 Contains("the file has 37 bytes)"));
  const std::string path = (dir / "x.safetensors").string();
  // A valid safetensors file written by someone else: no mgtrain checksum.
  const std::string json = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(json.size());
  write_all(path, bytes + json + "abcd");
  CHECK_THROWS_MATCHES(
      read_checkpoint_file(path), CorruptCheckpoint,
      Catch::Matchers::Message(path + ": the header does not begin with {\"__metadata__\":{\"mgtrain.checksum\":\" "
                                      "(not an mgtrain checkpoint, or a damaged header)"));
  CHECK_THROWS_AS(read_checkpoint_file((dir / "missing").string()), SystemError);
  CHECK_THAT(verify_checkpoint_file((dir / "missing").string()),
             Contains("open " + (dir / "missing").string() + ": No such file or directory"));
  CHECK_THAT(verify_checkpoint_file(dir.string()), Contains(dir.string() + ": not a regular file"));
}

TEST_CASE("checkpoint file: a bad test pause hook value is a usage error", "[checkpoint][file]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-hook");
  const fs::path dir = temp_dir.path();
  ::setenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT", "after-lunch", 1);
  CHECK_THROWS_AS(write_checkpoint_file((dir / "c").string(), {}, {}), UsageError);
  ::unsetenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT");
  ::setenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE", "12x", 1);
  CHECK_THROWS_WITH(write_checkpoint_file((dir / "c").string(), {}, {}),
                    Contains("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE=12x"));
  ::unsetenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE");
  CHECK(fs::is_empty(dir));
}

TEST_CASE("checkpoint image: the file's exact bytes in memory, read back and checked like a file",
          "[checkpoint][image]") {
  const testing::TempDir temp_dir("mgtrain-ckpt-image");
  for (const auto& checkpoint : {testing::make_test_checkpoint(7, 0.3), tricky_checkpoint()}) {
    const std::string path = (fs::path(temp_dir.path()) / "c.safetensors").string();
    write_checkpoint_file(path, checkpoint.metadata, checkpoint.records);
    const std::string file_bytes = read_all(path);
    const CheckpointImage snapshot("snapshot", checkpoint.metadata, checkpoint.records);
    const std::uint64_t size = snapshot.size();
    REQUIRE(size == file_bytes.size());
    std::vector<unsigned char> image(size + 100, 0xEE);  // room to spare: only `size` bytes are written
    CHECK(snapshot.write(image.data(), image.size()) == size);
    CHECK(std::memcmp(image.data(), file_bytes.data(), size) == 0);
    CHECK(image[size] == 0xEE);
    const CheckpointFile read = read_checkpoint_image("snapshot", image.data(), size);
    CHECK(testing::compare_with_checkpoint(read, checkpoint) == "");
    CHECK(read.path() == "snapshot");
    CHECK(read.file_size() == size);
    CHECK(read.checksum() == read_checkpoint_file(path).checksum());
  }
}

TEST_CASE("checkpoint image: too little room, a flipped byte or a cut image is refused, naming the image",
          "[checkpoint][image]") {
  const testing::TestCheckpoint checkpoint = testing::make_test_checkpoint(3, 0.1);
  const CheckpointImage snapshot("snapshot of rank 0", checkpoint.metadata, checkpoint.records);
  const std::uint64_t size = snapshot.size();
  std::vector<unsigned char> small(size - 1, 0xEE);
  CHECK_THAT(error_of([&] { snapshot.write(small.data(), small.size()); }),
             Contains("snapshot of rank 0") && Contains(fmt::format("needs {} bytes", size)));
  CHECK(std::all_of(small.begin(), small.end(), [](unsigned char b) { return b == 0xEE; }));  // nothing written
  std::vector<unsigned char> image(size);
  CheckpointImage("slot 1", checkpoint.metadata, checkpoint.records).write(image.data(), image.size());
  image[size - 1] ^= 0x01;  // a tensor byte
  CHECK_THAT(error_of([&] { read_checkpoint_image("slot 1", image.data(), size); }),
             StartsWith("slot 1: checksum mismatch"));
  image[size - 1] ^= 0x01;
  CHECK_THAT(error_of([&] { read_checkpoint_image("slot 1", image.data(), size - 5); }),
             StartsWith("slot 1: truncated"));
  CHECK_THAT(error_of([&] { read_checkpoint_image("slot 1", image.data(), 0); }), StartsWith("slot 1: empty"));
  CHECK(error_of([&] { read_checkpoint_image("slot 1", image.data(), size); }).empty());
}
