// The status API's bearer token: 32 random bytes as hex, generated per run and written to
// <run dir>/status_token (mode 0600, created exclusively), and the constant-time comparison the
// server checks POST requests with.
#pragma once

#include <string>
#include <string_view>

namespace mgtrain {

// 64 hex digits from getrandom(2). Throws SystemError when the kernel gives no randomness.
std::string generate_status_token();

// Creates `path` with mode 0600 (O_EXCL: an existing file is removed first, never written through, so a
// symlink planted there cannot redirect it) holding `token` and a newline. Throws SystemError.
void write_status_token_file(const std::string& path, const std::string& token);

// The token from `path` (whitespace trimmed); "" when it cannot be read.
std::string read_status_token_file(const std::string& path);

// Equal contents, in time that depends only on the lengths.
bool tokens_equal(std::string_view expected, std::string_view given);

}  // namespace mgtrain
