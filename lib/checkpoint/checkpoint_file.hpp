// One checkpoint file: writing it atomically in a single pass and reading it back with every byte verified.
// Torch-free: the trainer turns its state into named byte buffers (TensorRecord) and back.
//
// Format (version 1) — a valid safetensors file, so Python users can open it with `safetensors`:
//   bytes [0, 8)        N, the JSON header's length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)    the JSON header, padded with trailing spaces so that 8 + N is a multiple of 8:
//                       {"__metadata__":{"mgtrain.checksum":"<16 hex>","mgtrain.format":"1",<caller's keys, sorted>},
//                        "<tensor>":{"dtype":"F32","shape":[2,3],"data_offsets":[begin,end]}, ...}
//                       (no whitespace; tensors in the order given; names JSON-escaped; deterministic bytes)
//   bytes [8 + N, end)  the tensors' bytes, in the order given, contiguous; offsets are relative to 8 + N
// "mgtrain.checksum" is always the first metadata key, so its 16 lowercase hex digits sit at a fixed offset
// (8 + kChecksumDigitsOffsetInHeader). They are the XXH64 (seed 0) of the whole file with those 16 digits
// replaced by '0' characters. The data region starts 8-byte aligned; a tensor is aligned to its element size
// when the tensors before it have sizes that are multiples of it (e.g. list 8-byte dtypes first).
//
// The header is written and parsed with nlohmann::json (checkpoint_header.hpp). The writer's one test-only hook
// (pausing at a byte or a commit stage, for kill-at-any-instant tests) is checkpoint_test_hook.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"

namespace mgtrain {

// A checkpoint file is damaged, truncated or not a checkpoint. The message starts with the path and says
// exactly what is wrong.
class CorruptCheckpoint : public Error {
 public:
  explicit CorruptCheckpoint(const std::string& message) : Error(message) {}
};

// Bytes per element of a safetensors dtype ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8",
// "BOOL"); 0 for anything else.
std::size_t checkpoint_dtype_size(std::string_view dtype);

// One tensor to write: `nbytes` bytes at `data` (row-major, little-endian), which must equal
// product(shape) * dtype size. A zero-size tensor (a 0 in the shape) may have data == nullptr.
struct TensorRecord {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t nbytes = 0;
};

// Writes `path` atomically (util/atomic_file.hpp) in one pass over the data: header with a placeholder
// checksum, the tensors (hashed as they are written), the final checksum digits, fsync, rename, directory
// fsync. Metadata keys "mgtrain.checksum" and "mgtrain.format" are reserved. Invalid input (empty, duplicate
// or non-UTF-8 names, unknown dtype, negative dimension, nbytes not matching the shape, a tensor name or metadata
// key longer than 1000 bytes once JSON-escaped — earlier mgtrain releases parsed the header with yaml-cpp, which
// limits object keys to 1024 bytes) throws Error before anything is created; disk failures throw SystemError naming the
// temporary file and strerror.
void write_checkpoint_file(const std::string& path, const std::map<std::string, std::string>& metadata,
                           const std::vector<TensorRecord>& tensors);

// The same bytes as write_checkpoint_file, into memory (a snapshot kept in RAM, or sent to another node), checksum
// included. The input is checked and the header built once, by the constructor: invalid input (as above) throws
// Error naming `name`. The tensors' data must stay valid and unchanged until write().
class CheckpointImage {
 public:
  CheckpointImage(std::string name, const std::map<std::string, std::string>& metadata,
                  std::vector<TensorRecord> tensors);
  // The image's bytes: the room write() needs.
  std::uint64_t size() const { return size_; }
  // Writes the whole image into `out`, which holds `capacity` bytes; returns size(). Too little room throws Error
  // naming the image, before anything is written.
  std::uint64_t write(unsigned char* out, std::uint64_t capacity) const;

 private:
  std::string name_;
  std::string header_;
  std::vector<TensorRecord> tensors_;
  std::uint64_t size_ = 0;
};

// Where one tensor's bytes are in a checkpoint file.
struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // from the start of the file
  std::uint64_t nbytes = 0;
};

// A verified checkpoint: a file mapped read-only into memory (the mapping lives as long as this object), or an image
// in memory that the caller keeps alive and unchanged while this object is used (read_checkpoint_image).
// Checkpoint files are only ever replaced by rename, never rewritten in place; truncating one while it is
// open here would fault on access (SIGBUS), as with any mapped file.
class CheckpointFile {
 public:
  CheckpointFile(CheckpointFile&& other) noexcept;
  CheckpointFile& operator=(CheckpointFile&& other) noexcept;
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;
  ~CheckpointFile();

  const std::string& path() const { return path_; }
  // The metadata the writer was given (without the reserved mgtrain.checksum / mgtrain.format keys).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In file order, which is the order they were written in.
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  // nullptr when there is no tensor of that name.
  const TensorEntry* find(std::string_view name) const;
  // The tensor's nbytes bytes (not necessarily aligned to the element size: copy them out with memcpy).
  const unsigned char* bytes(const TensorEntry& tensor) const { return data_ + tensor.offset; }
  std::uint64_t file_size() const { return size_; }
  // The whole file's (or image's) file_size() bytes.
  const unsigned char* data() const { return data_; }
  std::uint64_t checksum() const { return checksum_; }

 private:
  friend CheckpointFile read_checkpoint_file(const std::string& path);
  friend CheckpointFile read_checkpoint_image(const std::string& name, const unsigned char* data, std::uint64_t size);
  CheckpointFile() = default;
  // Checks data_/size_ as read_checkpoint_file says, and reads the metadata and the tensors' places.
  void verify();

  std::string path_;
  const unsigned char* data_ = nullptr;  // the whole file
  std::uint64_t size_ = 0;
  std::uint64_t checksum_ = 0;
  bool mapped_ = false;  // data_ is this object's mapping of the file (an image is the caller's)
  std::map<std::string, std::string> metadata_;
  std::vector<TensorEntry> tensors_;
};

// Opens, maps and verifies `path`: size, header length, header JSON and its shape, dtypes, shapes and
// data_offsets (contiguous, in range, matching dtype * shape), the data length (a truncated file fails) and
// the checksum. Throws CorruptCheckpoint for a damaged file, SystemError when it cannot be opened or mapped.
CheckpointFile read_checkpoint_file(const std::string& path);

// An image in memory (CheckpointImage's bytes), checked as a file is; `name` names it in messages.
CheckpointFile read_checkpoint_image(const std::string& name, const unsigned char* data, std::uint64_t size);

// The same checks without throwing: the error message (naming the path), or "" when the file is valid.
std::string verify_checkpoint_file(const std::string& path);

// The header's first bytes, up to the checksum digits, and where the digits start inside the header.
inline constexpr std::string_view kCheckpointHeaderPrefix = R"({"__metadata__":{"mgtrain.checksum":")";
inline constexpr std::size_t kChecksumDigitsOffsetInHeader = kCheckpointHeaderPrefix.size();

}  // namespace mgtrain
