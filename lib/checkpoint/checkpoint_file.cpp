// Writing and verifying checkpoint files (safetensors layout + XXH64 checksum; see checkpoint_file.hpp).
#include "checkpoint/checkpoint_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/checkpoint_header.hpp"
#include "checkpoint/checkpoint_test_hook.hpp"
#include "util/atomic_file.hpp"
#include "util/fd.hpp"
#include "util/json_text.hpp"
#include "util/strings.hpp"
#include "util/xxhash64.hpp"

namespace mgtrain {
namespace {

constexpr std::uint64_t kMaxHeaderSize = 100'000'000;  // safetensors' own limit
constexpr std::size_t kChecksumDigits = 16;
using checkpoint_header::byte_size;
using checkpoint_header::kChecksumKey;
using checkpoint_header::kFormatKey;
using checkpoint_header::kFormatVersion;
using checkpoint_header::kMetadataKey;
using checkpoint_header::kZeroDigits;
// Object keys stay within 1000 bytes JSON-escaped: mgtrain releases that parsed the header with yaml-cpp
// (1024-byte implicit-key limit) can read every file this writes.
constexpr std::size_t kMaxQuotedKeyBytes = 1000;
// Data is hashed and written in pieces of this size, so each piece is still in cache when write() copies it.
constexpr std::size_t kStreamChunk = std::size_t{1} << 20;

struct DtypeSize {
  std::string_view name;
  std::size_t size;
};
constexpr DtypeSize kDtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t extra;
    std::uint32_t cp;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xe0) == 0xc0) {
      extra = 1, cp = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2, cp = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3, cp = lead & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      cp = cp << 6 | (b & 0x3f);
    }
    const std::uint32_t min = extra == 1 ? 0x80 : extra == 2 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

std::uint64_t get_le64(const unsigned char* in) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | in[i];
  return value;
}

// ---- writing ------------------------------------------------------------------------------------------

void check_tensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                   const std::vector<TensorRecord>& tensors) {
  const auto fail = [&](const std::string& what) { throw Error(fmt::format("write checkpoint {}: {}", path, what)); };
  for (const auto& [key, value] : metadata) {
    if (key == kChecksumKey || key == kFormatKey) fail(fmt::format("metadata key {} is reserved", key));
    if (!is_valid_utf8(key)) fail(fmt::format("metadata key {} is not valid UTF-8", json_string(key)));
    if (!is_valid_utf8(value)) fail(fmt::format("metadata value of {} is not valid UTF-8", json_string(key)));
    if (json_string(key).size() > kMaxQuotedKeyBytes) {
      fail(fmt::format("metadata key {}... is too long ({} bytes JSON-escaped, at most {})",
                       json_string(key.substr(0, 40)), json_string(key).size(), kMaxQuotedKeyBytes));
    }
  }
  std::set<std::string_view> names;
  for (const TensorRecord& tensor : tensors) {
    const std::string name = json_string(tensor.name);
    if (tensor.name.empty()) fail("a tensor has an empty name");
    if (tensor.name == kMetadataKey) fail("a tensor cannot be named __metadata__");
    if (!is_valid_utf8(tensor.name)) fail(fmt::format("tensor name {} is not valid UTF-8", name));
    if (name.size() > kMaxQuotedKeyBytes) {
      fail(fmt::format("tensor name {}... is too long ({} bytes JSON-escaped, at most {})",
                       json_string(tensor.name.substr(0, 40)), name.size(), kMaxQuotedKeyBytes));
    }
    if (!names.insert(tensor.name).second) fail(fmt::format("two tensors are named {}", name));
    const std::size_t element_size = checkpoint_dtype_size(tensor.dtype);
    if (element_size == 0) {
      fail(fmt::format("tensor {}: unknown dtype {} (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)", name,
                       json_string(tensor.dtype)));
    }
    const auto expected = byte_size(tensor.shape, element_size);
    if (!expected) fail(fmt::format("tensor {}: invalid shape {}", name, shape_text(tensor.shape)));
    if (*expected != tensor.nbytes) {
      fail(fmt::format("tensor {}: {} bytes given, shape {} of {} needs {}", name, tensor.nbytes,
                       shape_text(tensor.shape), tensor.dtype, *expected));
    }
    if (tensor.nbytes > 0 && tensor.data == nullptr) fail(fmt::format("tensor {}: no data", name));
  }
}

// ---- reading ------------------------------------------------------------------------------------------

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw CorruptCheckpoint(fmt::format("{}: {}", path, what));
}

struct MappedBytes {
  const unsigned char* data;
  std::uint64_t size;
};

// The whole regular file of at least 8 bytes, mapped read-only (the caller unmaps it).
MappedBytes map_checkpoint(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw SystemError(fmt::format("open {}", path), errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw SystemError(fmt::format("stat {}", path), errno);
  if (!S_ISREG(info.st_mode)) corrupt(path, "not a regular file");
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size < 8) {
    corrupt(path, size == 0 ? "empty file (0 bytes)"
                            : fmt::format("truncated: {} bytes, less than the 8-byte header length field", size));
  }
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0);
  if (mapped == MAP_FAILED) throw SystemError(fmt::format("mmap {} ({} bytes)", path, size), errno);
  return {static_cast<const unsigned char*>(mapped), size};
}

// The header length field, checked against the limit and the file's size.
std::uint64_t checked_header_size(const std::string& path, const unsigned char* bytes, std::uint64_t size) {
  const std::uint64_t header_size = get_le64(bytes);
  if (header_size > kMaxHeaderSize) {  // a text file, or another format altogether
    corrupt(path, fmt::format("not an mgtrain checkpoint (the header length field says {} bytes, more than the {} "
                              "safetensors allows; the file has {} bytes)",
                              header_size, kMaxHeaderSize, size));
  }
  if (header_size > size - 8) {
    corrupt(path, fmt::format(
                      "truncated: the header length field says {} bytes of JSON header, the file has {} bytes after it",
                      header_size, size - 8));
  }
  return header_size;
}

// The fixed prefix and the 16 checksum digits after it.
std::uint64_t stored_checksum_digits(const std::string& path, std::string_view header) {
  if (header.substr(0, kCheckpointHeaderPrefix.size()) != kCheckpointHeaderPrefix) {
    corrupt(path, fmt::format("the header does not begin with {} (not an mgtrain checkpoint, or a damaged header)",
                              kCheckpointHeaderPrefix));
  }
  const std::string_view digits = header.substr(kChecksumDigitsOffsetInHeader, kChecksumDigits);
  const bool digits_ok = digits.size() == kChecksumDigits &&
                         header.size() > kChecksumDigitsOffsetInHeader + kChecksumDigits &&
                         header[kChecksumDigitsOffsetInHeader + kChecksumDigits] == '"' &&
                         std::all_of(digits.begin(), digits.end(),
                                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!digits_ok)
    corrupt(path, fmt::format("damaged checksum field: {} is not 16 lowercase hex digits", json_string(digits)));
  return std::strtoull(std::string(digits).c_str(), nullptr, 16);
}

// Offsets contiguous from 0 (sorting `tensors` by them), ending exactly at the end of the file's data region.
void check_data_offsets(const std::string& path, std::vector<checkpoint_header::PlacedTensor>& tensors,
                        std::uint64_t data_size) {
  using checkpoint_header::PlacedTensor;
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const PlacedTensor& a, const PlacedTensor& b) { return a.begin < b.begin; });
  std::uint64_t expected_begin = 0;
  for (const PlacedTensor& tensor : tensors) {
    if (tensor.begin != expected_begin) {
      corrupt(path, fmt::format("tensor {}: data_offsets [{}, {}] do not start where the previous tensor ends ({})",
                                json_string(tensor.entry.name), tensor.begin, tensor.end, expected_begin));
    }
    expected_begin = tensor.end;
  }
  if (data_size < expected_begin) {
    corrupt(path, fmt::format("truncated: the header says {} bytes of tensor data, the file has {}", expected_begin,
                              data_size));
  }
  if (data_size > expected_begin) {
    corrupt(path,
            fmt::format(
                "{} unexpected bytes after the tensor data (the header says {} bytes of tensor data, the file has {})",
                data_size - expected_begin, expected_begin, data_size));
  }
}

// The checksum over the whole file with the digits as '0's.
void check_checksum(const std::string& path, const unsigned char* bytes, std::uint64_t size, std::uint64_t stored) {
  const std::size_t digits_at = 8 + kChecksumDigitsOffsetInHeader;
  Xxh64 hash;
  hash.update(bytes, digits_at);
  hash.update(kZeroDigits.data(), kZeroDigits.size());
  hash.update(bytes + digits_at + kChecksumDigits, size - digits_at - kChecksumDigits);
  const std::uint64_t computed = hash.digest();
  if (computed != stored) {
    corrupt(path,
            fmt::format("checksum mismatch: stored {:016x}, computed {:016x} (the file is damaged)", stored, computed));
  }
}

}  // namespace

std::size_t checkpoint_dtype_size(std::string_view dtype) {
  for (const DtypeSize& known : kDtypes)
    if (known.name == dtype) return known.size;
  return 0;
}

namespace {

// The checked header of a checkpoint of `tensors` (named `where` in messages).
std::string checked_header(const std::string& where, const std::map<std::string, std::string>& metadata,
                           const std::vector<TensorRecord>& tensors) {
  check_tensors(where, metadata, tensors);
  std::string header = checkpoint_header::build(metadata, tensors);
  if (header.size() - 8 > kMaxHeaderSize) {
    throw Error(fmt::format("write checkpoint {}: the header would have {} bytes, more than safetensors' limit of {}",
                            where, header.size() - 8, kMaxHeaderSize));
  }
  return header;
}

// The header and the tensors in order through `write`, hashed on the way, in pieces still in cache; the checksum's
// 16 digits (the header holds zeros in their place) are the caller's to put at 8 + kChecksumDigitsOffsetInHeader.
template <typename Write>
std::string emit_checkpoint(const std::string& header, const std::vector<TensorRecord>& tensors, Write write) {
  Xxh64 hash;
  hash.update(header.data(), header.size());
  write(header.data(), header.size());
  for (const TensorRecord& tensor : tensors) {
    const auto* p = static_cast<const unsigned char*>(tensor.data);
    for (std::size_t done = 0; done < tensor.nbytes;) {
      const std::size_t piece = std::min(kStreamChunk, tensor.nbytes - done);
      hash.update(p + done, piece);
      write(p + done, piece);
      done += piece;
    }
  }
  return fmt::format("{:016x}", hash.digest());
}

}  // namespace

void write_checkpoint_file(const std::string& path, const std::map<std::string, std::string>& metadata,
                           const std::vector<TensorRecord>& tensors) {
  const std::string header = checked_header(path, metadata, tensors);
  const CheckpointTestHook test_hook = CheckpointTestHook::from_environment();
  AtomicFileWriter file(path);
  const std::string digits =
      emit_checkpoint(header, tensors, [&](const void* data, std::size_t size) { test_hook.write(file, data, size); });
  file.pwrite_at(8 + kChecksumDigitsOffsetInHeader, digits.data(), digits.size());
  test_hook.arm_commit_stages(file);
  file.commit();
}

CheckpointImage::CheckpointImage(std::string name, const std::map<std::string, std::string>& metadata,
                                 std::vector<TensorRecord> tensors)
    : name_(std::move(name)), header_(checked_header(name_, metadata, tensors)), tensors_(std::move(tensors)) {
  size_ = header_.size();
  for (const TensorRecord& tensor : tensors_) size_ += tensor.nbytes;
}

std::uint64_t CheckpointImage::write(unsigned char* out, std::uint64_t capacity) const {
  if (size_ > capacity) {
    throw Error(fmt::format("write checkpoint {}: it needs {} bytes, the space for it has {}", name_, size_, capacity));
  }
  std::uint64_t at = 0;
  const std::string digits = emit_checkpoint(header_, tensors_, [&](const void* data, std::size_t bytes) {
    if (bytes > 0) std::memcpy(out + at, data, bytes);
    at += bytes;
  });
  std::copy(digits.begin(), digits.end(), out + 8 + kChecksumDigitsOffsetInHeader);
  return size_;
}

CheckpointFile::CheckpointFile(CheckpointFile&& other) noexcept { *this = std::move(other); }

CheckpointFile& CheckpointFile::operator=(CheckpointFile&& other) noexcept {
  if (this != &other) {
    if (data_ && mapped_) ::munmap(const_cast<unsigned char*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, false);
    checksum_ = other.checksum_;
    metadata_ = std::move(other.metadata_);
    tensors_ = std::move(other.tensors_);
  }
  return *this;
}

CheckpointFile::~CheckpointFile() {
  if (data_ && mapped_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

const TensorEntry* CheckpointFile::find(std::string_view name) const {
  for (const TensorEntry& tensor : tensors_)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

CheckpointFile read_checkpoint_file(const std::string& path) {
  CheckpointFile file;
  file.path_ = path;
  const MappedBytes mapped = map_checkpoint(path);
  file.data_ = mapped.data;
  file.size_ = mapped.size;
  file.mapped_ = true;
  file.verify();
  return file;
}

CheckpointFile read_checkpoint_image(const std::string& name, const unsigned char* data, std::uint64_t size) {
  CheckpointFile file;
  file.path_ = name;
  if (size < 8) {
    corrupt(name, size == 0 ? "empty (0 bytes)"
                            : fmt::format("truncated: {} bytes, less than the 8-byte header length field", size));
  }
  file.data_ = data;
  file.size_ = size;
  file.verify();
  return file;
}

void CheckpointFile::verify() {
  const std::string& path = path_;
  const unsigned char* const bytes = data_;
  const std::uint64_t size = size_;

  const std::uint64_t header_size = checked_header_size(path, bytes, size);
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), header_size);
  const std::uint64_t stored_checksum = stored_checksum_digits(path, header);

  checkpoint_header::Parsed parsed = checkpoint_header::parse(path, header);
  if (parsed.format.empty()) corrupt(path, "no mgtrain.format in __metadata__ (not an mgtrain checkpoint)");
  if (parsed.format != kFormatVersion) {
    corrupt(path, fmt::format("checkpoint format version {} is not supported (this mgtrain reads version {})",
                              json_string(parsed.format), kFormatVersion));
  }
  check_data_offsets(path, parsed.tensors, size - 8 - header_size);
  check_checksum(path, bytes, size, stored_checksum);

  checksum_ = stored_checksum;
  metadata_ = std::move(parsed.metadata);
  tensors_.reserve(parsed.tensors.size());
  for (checkpoint_header::PlacedTensor& tensor : parsed.tensors) {
    tensor.entry.offset = 8 + header_size + tensor.begin;
    tensors_.push_back(std::move(tensor.entry));
  }
}

std::string verify_checkpoint_file(const std::string& path) {
  try {
    read_checkpoint_file(path);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace mgtrain
