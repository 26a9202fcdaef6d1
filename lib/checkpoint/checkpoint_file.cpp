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
#include <yaml-cpp/yaml.h>

#include "util/atomic_file.hpp"
#include "util/json_writer.hpp"
#include "util/xxhash64.hpp"

namespace mgtrain {
namespace {

constexpr std::uint64_t kMaxHeaderSize = 100'000'000;  // safetensors' own limit
constexpr std::size_t kChecksumDigits = 16;
constexpr std::string_view kZeroDigits = "0000000000000000";
constexpr const char* kFormatVersion = "1";
constexpr const char* kChecksumKey = "mgtrain.checksum";
constexpr const char* kFormatKey = "mgtrain.format";
constexpr const char* kMetadataKey = "__metadata__";
// yaml-cpp, which parses the header, refuses JSON object keys longer than 1024 bytes (YAML's implicit-key limit).
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

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// product(shape) * element_size, or nullopt on overflow / a negative dimension.
std::optional<std::uint64_t> byte_size(const std::vector<std::int64_t>& shape, std::size_t element_size) {
  std::uint64_t total = element_size;
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

void put_le64(unsigned char* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::uint64_t get_le64(const unsigned char* in) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | in[i];
  return value;
}

// ---- test-only pause hook -------------------------------------------------------------------------------

struct PauseHook {
  std::optional<std::uint64_t> at_byte;
  std::string at_stage;
};

PauseHook pause_hook_from_environment() {
  PauseHook hook;
  if (const char* text = std::getenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE"); text && *text) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || *text == '-') {
      throw UsageError(fmt::format("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE={}: not a byte offset", text));
    }
    hook.at_byte = value;
  }
  if (const char* text = std::getenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT"); text && *text) {
    hook.at_stage = text;
    if (hook.at_stage != "before-fsync" && hook.at_stage != "before-rename" && hook.at_stage != "before-dir-fsync") {
      throw UsageError(fmt::format(
          "MGTRAIN_TEST_CHECKPOINT_PAUSE_AT={}: not one of before-fsync, before-rename, before-dir-fsync", text));
    }
  }
  return hook;
}

[[noreturn]] void pause_forever(const std::string& where) {
  const std::string line = "mgtrain-test: checkpoint write paused at " + where + "\n";
  std::fflush(stderr);
  if (::write(STDERR_FILENO, line.data(), line.size()) < 0) {
    // nothing to do: the test waiting for the line times out and says so
  }
  for (;;) ::pause();
}

// ---- writing ------------------------------------------------------------------------------------------

void check_tensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                   const std::vector<TensorRecord>& tensors) {
  const auto fail = [&](const std::string& what) { throw Error(fmt::format("write checkpoint {}: {}", path, what)); };
  for (const auto& [key, value] : metadata) {
    if (key == kChecksumKey || key == kFormatKey) fail(fmt::format("metadata key {} is reserved", key));
    if (!is_valid_utf8(key)) fail(fmt::format("metadata key {} is not valid UTF-8", json_quote(key)));
    if (!is_valid_utf8(value)) fail(fmt::format("metadata value of {} is not valid UTF-8", json_quote(key)));
    if (json_quote(key).size() > kMaxQuotedKeyBytes) {
      fail(fmt::format("metadata key {}... is too long ({} bytes JSON-escaped, at most {})", json_quote(key.substr(0, 40)),
                       json_quote(key).size(), kMaxQuotedKeyBytes));
    }
  }
  std::set<std::string_view> names;
  for (const TensorRecord& tensor : tensors) {
    const std::string name = json_quote(tensor.name);
    if (tensor.name.empty()) fail("a tensor has an empty name");
    if (tensor.name == kMetadataKey) fail("a tensor cannot be named __metadata__");
    if (!is_valid_utf8(tensor.name)) fail(fmt::format("tensor name {} is not valid UTF-8", name));
    if (name.size() > kMaxQuotedKeyBytes) {
      fail(fmt::format("tensor name {}... is too long ({} bytes JSON-escaped, at most {})", json_quote(tensor.name.substr(0, 40)),
                       name.size(), kMaxQuotedKeyBytes));
    }
    if (!names.insert(tensor.name).second) fail(fmt::format("two tensors are named {}", name));
    const std::size_t element_size = checkpoint_dtype_size(tensor.dtype);
    if (element_size == 0) {
      fail(fmt::format("tensor {}: unknown dtype {} (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)", name,
                       json_quote(tensor.dtype)));
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

// The 8-byte length and the padded JSON header, with the checksum digits as '0's.
std::string build_header(const std::map<std::string, std::string>& metadata, const std::vector<TensorRecord>& tensors) {
  std::string json(kCheckpointHeaderPrefix);
  json += kZeroDigits;
  json += fmt::format("\",\"{}\":\"{}\"", kFormatKey, kFormatVersion);
  for (const auto& [key, value] : metadata) {
    json += ',';
    json += json_quote(key);
    json += ':';
    json += json_quote(value);
  }
  json += '}';
  std::uint64_t offset = 0;
  for (const TensorRecord& tensor : tensors) {
    json += ',';
    json += json_quote(tensor.name);
    json += fmt::format(R"(:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", tensor.dtype,
                        fmt::join(tensor.shape, ","), offset, offset + tensor.nbytes);
    offset += tensor.nbytes;
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');  // 8 + size is a multiple of 8
  std::string header(8, '\0');
  put_le64(reinterpret_cast<unsigned char*>(header.data()), json.size());
  return header + json;
}

// Appends to the file, honouring the test-only byte pause hook.
class HookedOutput {
 public:
  HookedOutput(AtomicFileWriter& file, const PauseHook& hook) : file_(file), hook_(hook) {}

  void write(const void* data, std::size_t size) {
    if (hook_.at_byte && *hook_.at_byte <= file_.bytes_written() + size) {
      const std::uint64_t head = *hook_.at_byte - file_.bytes_written();
      file_.write(data, static_cast<std::size_t>(head));
      pause_forever(fmt::format("byte {}", *hook_.at_byte));
    }
    file_.write(data, size);
  }

 private:
  AtomicFileWriter& file_;
  const PauseHook& hook_;
};

// ---- reading ------------------------------------------------------------------------------------------

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw CorruptCheckpoint(fmt::format("{}: {}", path, what));
}

// A JSON string (a quoted YAML scalar; plain scalars would be numbers, true, null, ...).
bool is_json_string(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "!"; }

// A non-negative JSON integer: a plain scalar of decimal digits without leading zeros.
std::optional<std::uint64_t> json_uint(const YAML::Node& node) {
  if (!node.IsScalar() || node.Tag() != "?") return std::nullopt;
  const std::string& text = node.Scalar();
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(value, 10u, &value) || __builtin_add_overflow(value, static_cast<unsigned>(c - '0'), &value)) {
      return std::nullopt;
    }
  }
  return value;
}

std::string describe_node(const YAML::Node& node) {
  if (node.IsScalar()) return is_json_string(node) ? json_quote(node.Scalar()) : node.Scalar();
  if (node.IsSequence()) return "an array";
  if (node.IsMap()) return "an object";
  return "null";
}

void parse_metadata(const std::string& path, const YAML::Node& node, std::map<std::string, std::string>& metadata,
                    std::string& format) {
  if (!node.IsMap()) corrupt(path, fmt::format("__metadata__ is {}, not an object", describe_node(node)));
  for (const auto& item : node) {
    if (!is_json_string(item.first)) corrupt(path, fmt::format("__metadata__ key {} is not a string", describe_node(item.first)));
    const std::string& key = item.first.Scalar();
    if (!is_json_string(item.second)) {
      corrupt(path, fmt::format("__metadata__ value of {} is {}, not a string", json_quote(key), describe_node(item.second)));
    }
    if (key == kFormatKey) {
      format = item.second.Scalar();
    } else if (key != kChecksumKey) {
      if (!metadata.emplace(key, item.second.Scalar()).second) corrupt(path, fmt::format("__metadata__ key {} appears twice", json_quote(key)));
    }
  }
}

TensorEntry parse_tensor(const std::string& path, const std::string& name, const YAML::Node& node,
                         std::uint64_t& begin, std::uint64_t& end) {
  const std::string quoted = json_quote(name);
  const auto fail = [&](const std::string& what) { corrupt(path, fmt::format("tensor {}: {}", quoted, what)); };
  if (!node.IsMap()) fail(fmt::format("{}, not an object", describe_node(node)));
  TensorEntry entry;
  entry.name = name;
  bool have_dtype = false, have_shape = false, have_offsets = false;
  for (const auto& item : node) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : std::string();
    if (key == "dtype" && is_json_string(item.first)) {
      if (!is_json_string(item.second) || checkpoint_dtype_size(item.second.Scalar()) == 0) {
        fail(fmt::format("unknown dtype {}", describe_node(item.second)));
      }
      entry.dtype = item.second.Scalar();
      have_dtype = true;
    } else if (key == "shape" && is_json_string(item.first)) {
      if (!item.second.IsSequence()) fail(fmt::format("shape is {}, not an array", describe_node(item.second)));
      for (const auto& dim : item.second) {
        const auto value = json_uint(dim);
        if (!value || *value > static_cast<std::uint64_t>(INT64_MAX)) fail(fmt::format("invalid dimension {} in shape", describe_node(dim)));
        entry.shape.push_back(static_cast<std::int64_t>(*value));
      }
      have_shape = true;
    } else if (key == "data_offsets" && is_json_string(item.first)) {
      const YAML::Node& offsets = item.second;
      std::optional<std::uint64_t> b, e;
      if (offsets.IsSequence() && offsets.size() == 2) b = json_uint(offsets[0]), e = json_uint(offsets[1]);
      if (!b || !e || *b > *e) fail("data_offsets is not [begin, end] with 0 <= begin <= end");
      begin = *b;
      end = *e;
      have_offsets = true;
    } else {
      fail(fmt::format("unexpected key {}", describe_node(item.first)));
    }
  }
  if (!have_dtype || !have_shape || !have_offsets) {
    fail(fmt::format("missing {}", !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets"));
  }
  const auto expected = byte_size(entry.shape, checkpoint_dtype_size(entry.dtype));
  if (!expected || *expected != end - begin) {
    fail(fmt::format("data_offsets [{}, {}] span {} bytes, shape {} of {} needs {}", begin, end, end - begin,
                     shape_text(entry.shape), entry.dtype, expected ? fmt::format("{}", *expected) : "more than 2^64"));
  }
  entry.nbytes = end - begin;
  return entry;
}

}  // namespace

std::size_t checkpoint_dtype_size(std::string_view dtype) {
  for (const DtypeSize& known : kDtypes)
    if (known.name == dtype) return known.size;
  return 0;
}

void write_checkpoint_file(const std::string& path, const std::map<std::string, std::string>& metadata,
                           const std::vector<TensorRecord>& tensors) {
  check_tensors(path, metadata, tensors);
  const PauseHook hook = pause_hook_from_environment();
  const std::string header = build_header(metadata, tensors);
  if (header.size() - 8 > kMaxHeaderSize) {
    throw Error(fmt::format("write checkpoint {}: the header would have {} bytes, more than safetensors' limit of {}",
                            path, header.size() - 8, kMaxHeaderSize));
  }

  AtomicFileWriter file(path);
  HookedOutput out(file, hook);
  Xxh64 hash;
  hash.update(header.data(), header.size());
  out.write(header.data(), header.size());
  for (const TensorRecord& tensor : tensors) {
    const auto* p = static_cast<const unsigned char*>(tensor.data);
    for (std::size_t done = 0; done < tensor.nbytes;) {
      const std::size_t piece = std::min(kStreamChunk, tensor.nbytes - done);
      hash.update(p + done, piece);
      out.write(p + done, piece);
      done += piece;
    }
  }
  const std::string digits = fmt::format("{:016x}", hash.digest());
  file.pwrite_at(8 + kChecksumDigitsOffsetInHeader, digits.data(), digits.size());
  file.set_commit_stage_callback([&hook](std::string_view stage) {
    if (stage == hook.at_stage) pause_forever(std::string(stage));
  });
  file.commit();
}

CheckpointFile::CheckpointFile(CheckpointFile&& other) noexcept { *this = std::move(other); }

CheckpointFile& CheckpointFile::operator=(CheckpointFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    checksum_ = other.checksum_;
    metadata_ = std::move(other.metadata_);
    tensors_ = std::move(other.tensors_);
  }
  return *this;
}

CheckpointFile::~CheckpointFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

const TensorEntry* CheckpointFile::find(std::string_view name) const {
  for (const TensorEntry& tensor : tensors_)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

CheckpointFile read_checkpoint_file(const std::string& path) {
  CheckpointFile file;
  file.path_ = path;
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw SystemError(fmt::format("open {}", path), errno);
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
      const int err = errno;
      ::close(fd);
      throw SystemError(fmt::format("stat {}", path), err);
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      corrupt(path, "not a regular file");
    }
    const auto size = static_cast<std::uint64_t>(info.st_size);
    if (size < 8) {
      ::close(fd);
      corrupt(path, size == 0 ? "empty file (0 bytes)"
                              : fmt::format("truncated: {} bytes, less than the 8-byte header length field", size));
    }
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (mapped == MAP_FAILED) throw SystemError(fmt::format("mmap {} ({} bytes)", path, size), err);
    file.data_ = static_cast<const unsigned char*>(mapped);
    file.size_ = size;
  }
  const unsigned char* const bytes = file.data_;
  const std::uint64_t size = file.size_;

  // The header length and the fixed prefix with the checksum digits.
  const std::uint64_t header_size = get_le64(bytes);
  if (header_size > kMaxHeaderSize) {
    corrupt(path, fmt::format("damaged header length field: {} bytes (safetensors allows at most {})", header_size, kMaxHeaderSize));
  }
  if (header_size > size - 8) {
    corrupt(path, fmt::format("truncated: the header length field says {} bytes of JSON header, the file has {} bytes after it",
                              header_size, size - 8));
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), header_size);
  if (header.substr(0, kCheckpointHeaderPrefix.size()) != kCheckpointHeaderPrefix) {
    corrupt(path, fmt::format("the header does not begin with {} (not an mgtrain checkpoint, or a damaged header)",
                              kCheckpointHeaderPrefix));
  }
  const std::string_view digits = header.substr(kChecksumDigitsOffsetInHeader, kChecksumDigits);
  const bool digits_ok = digits.size() == kChecksumDigits && header.size() > kChecksumDigitsOffsetInHeader + kChecksumDigits &&
                         header[kChecksumDigitsOffsetInHeader + kChecksumDigits] == '"' &&
                         std::all_of(digits.begin(), digits.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!digits_ok) corrupt(path, fmt::format("damaged checksum field: {} is not 16 lowercase hex digits", json_quote(digits)));
  const std::uint64_t stored_checksum = std::strtoull(std::string(digits).c_str(), nullptr, 16);

  // The JSON header.
  YAML::Node root;
  try {
    root = YAML::Load(std::string(header));
  } catch (const YAML::Exception& e) {
    corrupt(path, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!root.IsMap()) corrupt(path, "the header is not a JSON object");
  std::string format;
  bool have_metadata = false;
  std::set<std::string> names;
  struct Placed {
    TensorEntry entry;
    std::uint64_t begin, end;
  };
  std::vector<Placed> placed;
  for (const auto& item : root) {
    if (!is_json_string(item.first)) corrupt(path, fmt::format("header key {} is not a string", describe_node(item.first)));
    const std::string& name = item.first.Scalar();
    if (!names.insert(name).second) corrupt(path, fmt::format("header key {} appears twice", json_quote(name)));
    if (name == kMetadataKey) {
      parse_metadata(path, item.second, file.metadata_, format);
      have_metadata = true;
      continue;
    }
    Placed tensor;
    tensor.entry = parse_tensor(path, name, item.second, tensor.begin, tensor.end);
    placed.push_back(std::move(tensor));
  }
  if (!have_metadata || format.empty()) corrupt(path, "no mgtrain.format in __metadata__ (not an mgtrain checkpoint)");
  if (format != kFormatVersion) {
    corrupt(path, fmt::format("checkpoint format version {} is not supported (this mgtrain reads version {})", json_quote(format), kFormatVersion));
  }

  // Offsets: contiguous from 0, in file order.
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) { return a.begin < b.begin; });
  std::uint64_t expected_begin = 0;
  for (const Placed& tensor : placed) {
    if (tensor.begin != expected_begin) {
      corrupt(path, fmt::format("tensor {}: data_offsets [{}, {}] do not start where the previous tensor ends ({})",
                                json_quote(tensor.entry.name), tensor.begin, tensor.end, expected_begin));
    }
    expected_begin = tensor.end;
  }
  const std::uint64_t data_size = size - 8 - header_size;
  if (data_size < expected_begin) {
    corrupt(path, fmt::format("truncated: the header says {} bytes of tensor data, the file has {}", expected_begin, data_size));
  }
  if (data_size > expected_begin) {
    corrupt(path, fmt::format("{} unexpected bytes after the tensor data (the header says {} bytes of tensor data, the file has {})",
                              data_size - expected_begin, expected_begin, data_size));
  }

  // The checksum over the whole file with the digits as '0's.
  const std::size_t digits_at = 8 + kChecksumDigitsOffsetInHeader;
  Xxh64 hash;
  hash.update(bytes, digits_at);
  hash.update(kZeroDigits.data(), kZeroDigits.size());
  hash.update(bytes + digits_at + kChecksumDigits, size - digits_at - kChecksumDigits);
  const std::uint64_t computed = hash.digest();
  if (computed != stored_checksum) {
    corrupt(path, fmt::format("checksum mismatch: stored {}, computed {:016x} (the file is damaged)", digits, computed));
  }

  file.checksum_ = stored_checksum;
  file.tensors_.reserve(placed.size());
  for (Placed& tensor : placed) {
    tensor.entry.offset = 8 + header_size + tensor.begin;
    file.tensors_.push_back(std::move(tensor.entry));
  }
  return file;
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
