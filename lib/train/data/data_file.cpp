// Whole-file reads with transparent gzip inflation (see data_file.hpp).
#include "train/data/data_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <algorithm>
#include <cerrno>
#include <cstdint>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

std::vector<uint8_t> read_raw(const std::string& path) {
  const Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = file.get();
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw UsageError(fmt::format("{}: no such file", path));
    throw SystemError(fmt::format("open {}", path), err);
  }
  struct stat st {};
  std::vector<uint8_t> bytes;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  uint8_t chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(fmt::format("read {}", path), errno);
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  return bytes;
}

bool is_gzip(const std::vector<uint8_t>& bytes) { return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b; }

// Inflates every gzip member in `compressed` (gzip allows concatenated members).
std::vector<uint8_t> inflate_gzip(const std::vector<uint8_t>& compressed, const std::string& path) {
  std::vector<uint8_t> out;
  // The trailer's ISIZE (uncompressed size mod 2^32) of the last member is a good capacity hint.
  const size_t n = compressed.size();
  if (n >= 18) {
    const uint32_t isize = uint32_t(compressed[n - 4]) | uint32_t(compressed[n - 3]) << 8 |
                           uint32_t(compressed[n - 2]) << 16 | uint32_t(compressed[n - 1]) << 24;
    if (isize < (uint32_t(1) << 31)) out.reserve(isize);
  }
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK) throw Error(fmt::format("{}: zlib inflateInit2 failed", path));
  stream.next_in = const_cast<Bytef*>(compressed.data());
  stream.avail_in = static_cast<uInt>(std::min<size_t>(compressed.size(), UINT32_MAX));
  size_t fed = stream.avail_in;
  uint8_t chunk[1 << 16];
  for (;;) {
    stream.next_out = chunk;
    stream.avail_out = sizeof chunk;
    const int rc = inflate(&stream, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof chunk - stream.avail_out));
    if (stream.avail_in == 0 && fed < compressed.size()) {
      const size_t more = std::min<size_t>(compressed.size() - fed, UINT32_MAX);
      stream.next_in = const_cast<Bytef*>(compressed.data() + fed);
      stream.avail_in = static_cast<uInt>(more);
      fed += more;
    }
    if (rc == Z_STREAM_END) {
      if (stream.avail_in == 0 && fed == compressed.size()) break;
      inflateReset(&stream);  // another gzip member follows
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && stream.avail_in == 0) {
      inflateEnd(&stream);
      throw UsageError(fmt::format("{}: truncated gzip stream (ends after {} compressed bytes, {} bytes inflated)",
                                   path, compressed.size(), out.size()));
    }
    const std::string why = stream.msg ? stream.msg : fmt::format("zlib error {}", rc);
    inflateEnd(&stream);
    throw UsageError(fmt::format("{}: corrupt gzip stream: {}", path, why));
  }
  inflateEnd(&stream);
  return out;
}

}  // namespace

bool data_file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::string find_data_file(const std::string& directory, const std::string& name) {
  const std::string plain = directory.empty() ? name : directory + "/" + name;
  if (data_file_exists(plain)) return plain;
  if (data_file_exists(plain + ".gz")) return plain + ".gz";
  if (!data_file_exists(directory))
    throw UsageError(fmt::format("{}: no such directory (looking for {})", directory, name));
  throw UsageError(fmt::format("{}: no such file (nor {}.gz)", plain, plain));
}

std::vector<uint8_t> read_data_file(const std::string& path) {
  std::vector<uint8_t> bytes = read_raw(path);
  if (is_gzip(bytes)) return inflate_gzip(bytes, path);
  return bytes;
}

}  // namespace mgtrain
