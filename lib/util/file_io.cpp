// Reading whole files (see file_io.hpp).
#include "util/file_io.hpp"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

// errno of the failure, 0 on success.
int read_into(const std::string& path, std::string& out) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace

std::string read_file(const std::string& path) {
  std::string text;
  if (int error = read_into(path, text)) throw SystemError("cannot read " + path, error);
  return text;
}

std::optional<std::string> try_read_file(const std::string& path) {
  std::string text;
  if (read_into(path, text) != 0) return std::nullopt;
  return text;
}

}  // namespace mgtrain
