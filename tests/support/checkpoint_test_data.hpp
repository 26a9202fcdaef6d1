// Deterministic checkpoint contents for the checkpoint tests and tests/support/checkpoint_write_tool.cpp:
// a few small tensors of several dtypes (one zero-size, one scalar, one of odd length) and one large F32
// tensor of about the requested size, all filled from the step, so any process can rebuild and compare them.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/snapshot_store.hpp"

namespace mgtrain::testing {

struct TestCheckpoint {
  std::map<std::string, std::string> metadata;
  std::vector<std::vector<unsigned char>> buffers;  // owns the bytes the records point at
  std::vector<TensorRecord> records;
  std::uint64_t data_bytes = 0;
};

// splitmix64-derived bytes: cheap, and different for every (seed, position).
inline void fill_test_bytes(std::vector<unsigned char>& bytes, std::uint64_t seed) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::memcpy(bytes.data() + i, &z, 8);
  }
  for (; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(seed + i);
}

// The checkpoint of `step` with about `megabytes` MiB (2^20 bytes) in its large tensor (0: only small ones).
inline TestCheckpoint make_test_checkpoint(std::int64_t step, double megabytes) {
  TestCheckpoint checkpoint;
  checkpoint.metadata = {{"step", std::to_string(step)}, {"written_by", "mgtrain checkpoint tests"}};
  const auto big_elements = static_cast<std::int64_t>(megabytes * 1024 * 1024 / 4);
  struct Spec {
    const char* name;
    const char* dtype;
    std::vector<std::int64_t> shape;
    std::size_t element_size;
  };
  const std::vector<Spec> specs = {
      {"model.bias", "F64", {3}, 8},
      {"optimizer.step", "I64", {}, 8},
      {"model.weight", "F32", {big_elements / 256, 256}, 4},
      {"model.tail", "F32", {big_elements % 256}, 4},
      {"model.half", "BF16", {2, 3}, 2},
      {"empty", "F32", {0, 4}, 4},
      {"rng.state", "U8", {5}, 1},
  };
  checkpoint.buffers.reserve(specs.size());
  for (std::size_t index = 0; index < specs.size(); ++index) {
    const Spec& spec = specs[index];
    std::size_t nbytes = spec.element_size;
    for (std::int64_t dim : spec.shape) nbytes *= static_cast<std::size_t>(dim);
    checkpoint.buffers.emplace_back(nbytes);
    fill_test_bytes(checkpoint.buffers.back(), static_cast<std::uint64_t>(step) * 1000 + index);
    checkpoint.records.push_back({spec.name, spec.dtype, spec.shape, checkpoint.buffers.back().data(), nbytes});
    checkpoint.data_bytes += nbytes;
  }
  return checkpoint;
}

// "" when `file` holds exactly the tensors and metadata of `expected`, else what differs.
inline std::string compare_with_checkpoint(const CheckpointFile& file, const TestCheckpoint& expected) {
  if (file.metadata() != expected.metadata) return "metadata differs";
  if (file.tensors().size() != expected.records.size()) {
    return fmt::format("{} tensors, expected {}", file.tensors().size(), expected.records.size());
  }
  for (std::size_t i = 0; i < expected.records.size(); ++i) {
    const TensorEntry& got = file.tensors()[i];
    const TensorRecord& want = expected.records[i];
    if (got.name != want.name || got.dtype != want.dtype || got.shape != want.shape || got.nbytes != want.nbytes) {
      return fmt::format("tensor {}: name, dtype, shape or size differs from {}", i, want.name);
    }
    if (want.nbytes > 0 && std::memcmp(file.bytes(got), want.data, want.nbytes) != 0)
      return fmt::format("tensor {}: bytes differ", want.name);
  }
  return "";
}

// `checkpoint` as the snapshot of `step` into `store` (as a worker writes one).
inline void put_snapshot(SnapshotStore& store, std::int64_t step, const TestCheckpoint& checkpoint) {
  const CheckpointImage image("snapshot", checkpoint.metadata, checkpoint.records);
  store.write(step, image.size(), [&](unsigned char* room) { image.write(room, image.size()); });
}

}  // namespace mgtrain::testing
