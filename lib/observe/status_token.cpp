// Generates, stores, reads and compares the status API's bearer token (see status_token.hpp).
#include "observe/status_token.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {

std::string generate_status_token() {
  unsigned char bytes[32];
  std::size_t have = 0;
  while (have < sizeof bytes) {
    ssize_t got = getrandom(bytes + have, sizeof bytes - have, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw SystemError("getrandom() for the status API token", errno);
    }
    have += static_cast<std::size_t>(got);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char byte : bytes) {
    token += kHex[byte >> 4];
    token += kHex[byte & 15];
  }
  return token;
}

void write_status_token_file(const std::string& path, const std::string& token) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) throw SystemError("cannot remove the old " + path, errno);
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw SystemError("cannot create the status token file " + path, errno);
  const std::string text = token + "\n";
  bool ok =
      fchmod(fd.get(), 0600) == 0 && write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int saved = errno;
  if (!fd.close() && ok) {  // close() can report a deferred write error
    ok = false;
    saved = errno;
  }
  if (!ok) throw SystemError("cannot write the status token file " + path, saved);
}

std::string read_status_token_file(const std::string& path) {
  std::ifstream file(path);
  std::string token;
  file >> token;
  return token;
}

bool tokens_equal(std::string_view expected, std::string_view given) {
  unsigned char difference = expected.size() == given.size() ? 0 : 1;
  const std::size_t n = expected.size();
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference |= static_cast<unsigned char>(static_cast<unsigned char>(expected[i]) ^ g);
  }
  return difference == 0 && !expected.empty();
}

}  // namespace mgtrain
