// Bounded reading of config files (see config_file.hpp): open without blocking, fstat, refuse anything but a regular
// file within the limit, then read at most limit + 1 bytes.
#include "config/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string size_text(std::size_t bytes) {
  if (bytes % (1024u * 1024u) == 0) return fmt::format("{} MiB", bytes / (1024u * 1024u));
  return fmt::format("{} bytes", bytes);
}

}  // namespace

std::string read_bounded_file(const std::string& path, const std::string& what, std::size_t max_bytes,
                              FileSecrecy secrecy) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the type check below refuses it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) throw UsageError(fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(errno)));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0)
    throw UsageError(fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(errno)));
  if (!S_ISREG(info.st_mode))
    throw UsageError(fmt::format("{}: is {}, expected a {} (a regular file of at most {})", path, kind_of(info.st_mode),
                                 what, size_text(max_bytes)));
  if (secrecy == FileSecrecy::kOwnerOnly && (info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw UsageError(fmt::format("{}: the {} can be read or written by other users (mode {:04o}): `chmod 600 {}`", path,
                                 what, info.st_mode & 07777, path));
  }
  const auto too_large = [&] {
    return UsageError(fmt::format("{}: the {} is larger than the limit of {} ({} bytes)", path, what,
                                  size_text(max_bytes), max_bytes));
  };
  if (static_cast<std::uintmax_t>(info.st_size) > max_bytes) throw too_large();
  // At most limit + 1 bytes, so a file that grows while it is read (or lies about its size) stops there.
  const std::size_t cap = max_bytes + 1;
  std::string text(static_cast<std::size_t>(info.st_size) + 1, '\0');
  std::size_t used = 0;
  for (;;) {
    if (used == text.size()) {
      if (text.size() >= cap) break;
      text.resize(std::min(cap, text.size() * 2));
    }
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UsageError(fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(errno)));
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > max_bytes) throw too_large();
  text.resize(used);
  return text;
}

}  // namespace mgtrain
