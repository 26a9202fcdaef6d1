// NpyFile: the .npy preamble (magic, version, header length), the data size and alignment checks, and the
// read-only mapping of the data (see npy_file.hpp); the header dict is npy_header.cpp's. The format is the one
// numpy documents in its numpy.lib.format module ("The .npy format").
#include "worker_io/npy_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.hpp"
#include "util/fd.hpp"
#include "worker_io/npy_header.hpp"

namespace mgtrain {

// The data is used in place as native numbers, and .npy files are little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "NpyFile reads little-endian data in place");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;  // numpy's own reader stops at 10000 by default

std::string hex_bytes(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += fmt::format("{}{:02x}", out.empty() ? "" : " ", static_cast<unsigned char>(c));
  return out;
}

// Reads up to `size` bytes at offset 0 (fewer only at the end of the file).
std::string read_prefix(const Fd& fd, const std::string& path, std::size_t size) {
  std::string bytes(size, '\0');
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd.get(), bytes.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError(fmt::format("read {}", path), errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

std::uint32_t get_le(std::string_view bytes, std::size_t offset, std::size_t width) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i)
    value |= std::uint32_t{static_cast<unsigned char>(bytes[offset + i])} << 8 * i;
  return value;
}

}  // namespace

const char* npy_type_name(NpyType type) {
  switch (type) {
    case NpyType::Bool:
      return "bool";
    case NpyType::Int8:
      return "int8";
    case NpyType::UInt8:
      return "uint8";
    case NpyType::Int16:
      return "int16";
    case NpyType::UInt16:
      return "uint16";
    case NpyType::Int32:
      return "int32";
    case NpyType::UInt32:
      return "uint32";
    case NpyType::Int64:
      return "int64";
    case NpyType::UInt64:
      return "uint64";
    case NpyType::Float16:
      return "float16";
    case NpyType::Float32:
      return "float32";
    case NpyType::Float64:
      return "float64";
  }
  return "?";
}

std::size_t npy_type_size(NpyType type) {
  switch (type) {
    case NpyType::Bool:
    case NpyType::Int8:
    case NpyType::UInt8:
      return 1;
    case NpyType::Int16:
    case NpyType::UInt16:
    case NpyType::Float16:
      return 2;
    case NpyType::Int32:
    case NpyType::UInt32:
    case NpyType::Float32:
      return 4;
    case NpyType::Int64:
    case NpyType::UInt64:
    case NpyType::Float64:
      return 8;
  }
  return 0;
}

std::string npy_shape_text(const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

NpyFile NpyFile::open(const std::string& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw SystemError(fmt::format("open {}", path), errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw SystemError(fmt::format("stat {}", path), errno);
  if (!S_ISREG(info.st_mode)) throw UsageError(fmt::format("{}: not a regular file, expected a .npy file", path));
  const auto file_bytes = static_cast<std::uint64_t>(info.st_size);
  if (file_bytes == 0) throw UsageError(fmt::format("{}: empty file (0 bytes), expected a .npy file", path));

  // The preamble: magic, major and minor version, header length (2 bytes in version 1, 4 in versions 2 and 3).
  const std::string prefix =
      read_prefix(fd, path, static_cast<std::size_t>(std::min<std::uint64_t>(file_bytes, 12 + kMaxHeaderBytes)));
  if (prefix.compare(0, kMagic.size(), kMagic) != 0) {
    const bool zip = prefix.compare(0, 4, "PK\x03\x04") == 0;
    throw UsageError(fmt::format("{}: not a NumPy .npy file (it starts with {}, a .npy file starts with \\x93NUMPY{})",
                                 path, hex_bytes(std::string_view(prefix).substr(0, 8)),
                                 zip ? "; an .npz archive? save each array with numpy.save" : ""));
  }
  if (prefix.size() < 10) {
    throw UsageError(
        fmt::format("{}: truncated: {} bytes, shorter than the 10-byte .npy preamble", path, prefix.size()));
  }
  const int major = static_cast<unsigned char>(prefix[6]);
  const int minor = static_cast<unsigned char>(prefix[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw UsageError(fmt::format(
        "{}: unsupported .npy format version {}.{}; mgtrain reads versions 1.0, 2.0 and 3.0 (numpy.save writes them)",
        path, major, minor));
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (prefix.size() < 8 + length_bytes) {
    throw UsageError(fmt::format("{}: truncated: {} bytes, shorter than the {}-byte .npy {}.0 preamble", path,
                                 prefix.size(), 8 + length_bytes, major));
  }
  const std::size_t header_bytes = get_le(prefix, 8, length_bytes);
  const std::size_t data_offset = 8 + length_bytes + header_bytes;
  if (header_bytes > kMaxHeaderBytes) {
    throw UsageError(
        fmt::format("{}: the .npy header length field says {} bytes, more than the {} mgtrain accepts "
                    "(a damaged file? numpy writes a few hundred)",
                    path, header_bytes, kMaxHeaderBytes));
  }
  if (data_offset > file_bytes) {
    throw UsageError(
        fmt::format("{}: truncated: the .npy header length field says {} bytes, the file holds {} "
                    "after the preamble",
                    path, header_bytes, file_bytes - (8 + length_bytes)));
  }
  const NpyHeader header = parse_npy_header(path, std::string_view(prefix).substr(8 + length_bytes, header_bytes));

  NpyFile file;
  file.path_ = path;
  file.type_ = header.type;
  file.shape_ = header.shape;
  const std::size_t item_bytes = npy_type_size(header.type);
  // Elements per row and bytes in all, each checked against overflow of int64 (and so of size_t).
  std::int64_t row_elements = 1;
  std::int64_t total_bytes = static_cast<std::int64_t>(item_bytes);
  bool overflow = false;
  for (std::size_t i = 0; i < header.shape.size(); ++i) {
    if (i > 0) overflow = overflow || __builtin_mul_overflow(row_elements, header.shape[i], &row_elements);
    overflow = overflow || __builtin_mul_overflow(total_bytes, header.shape[i], &total_bytes);
  }
  if (overflow) {
    throw UsageError(fmt::format("{}: shape {} of {} is too large (its size overflows 64 bits): a damaged header?",
                                 path, npy_shape_text(header.shape), npy_type_name(header.type)));
  }
  file.row_elements_ = row_elements;
  file.data_bytes_ = static_cast<std::size_t>(total_bytes);

  const std::uint64_t held = file_bytes - data_offset;
  const auto needed = static_cast<std::uint64_t>(total_bytes);
  if (held < needed) {
    throw UsageError(fmt::format("{}: truncated: holds {} bytes of data, shape {} of {} needs {}", path, held,
                                 npy_shape_text(header.shape), npy_type_name(header.type), needed));
  }
  if (held > needed) {
    throw UsageError(fmt::format(
        "{}: {} bytes after the data: shape {} of {} needs {} bytes, the file holds {} (several arrays saved into "
        "one file? save each with numpy.save into its own file)",
        path, held - needed, npy_shape_text(header.shape), npy_type_name(header.type), needed, held));
  }
  if (data_offset % item_bytes != 0) {
    throw UsageError(
        fmt::format("{}: the data starts at byte {}, not a multiple of the {}-byte {} element size "
                    "(numpy.save aligns it: was the header edited?)",
                    path, data_offset, item_bytes, npy_type_name(header.type)));
  }
  if (needed == 0) return file;  // nothing to map: data() stays nullptr

  void* mapped = ::mmap(nullptr, static_cast<std::size_t>(file_bytes), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapped == MAP_FAILED) throw SystemError(fmt::format("mmap {} ({} bytes)", path, file_bytes), errno);
  file.mapping_ = mapped;
  file.mapping_bytes_ = static_cast<std::size_t>(file_bytes);
  file.data_ = static_cast<const unsigned char*>(mapped) + data_offset;
  return file;
}

NpyFile::NpyFile(NpyFile&& other) noexcept { *this = std::move(other); }

NpyFile& NpyFile::operator=(NpyFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    type_ = other.type_;
    shape_ = std::move(other.shape_);
    row_elements_ = other.row_elements_;
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    data_bytes_ = std::exchange(other.data_bytes_, 0);
  }
  return *this;
}

NpyFile::~NpyFile() { unmap(); }

void NpyFile::unmap() {
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
  mapping_bytes_ = 0;
  data_ = nullptr;
  data_bytes_ = 0;
}

}  // namespace mgtrain
