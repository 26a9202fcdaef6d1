// HMAC-SHA256 frame tags with libsodium (see frame_auth.hpp).
#include "wire/frame_auth.hpp"

#include <sodium.h>

#include <stdexcept>

#include "util/error.hpp"

namespace mgtrain::rdzv {
namespace {

constexpr std::size_t kNonceBytes = 16;
constexpr char kKeyLabel[] = "mgtrain-rdzv-3";

void ensure_sodium() {
  static const int ready = sodium_init();
  if (ready < 0)
    throw Error("libsodium could not be initialised (no random source?): the rendezvous cannot be authenticated");
}

std::string to_hex(const unsigned char* data, std::size_t size) {
  std::string hex(size * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), data, size);
  hex.resize(size * 2);
  return hex;
}

bool from_hex(const std::string& hex, unsigned char* out, std::size_t size) {
  std::size_t written = 0;
  return hex.size() == size * 2 && sodium_hex2bin(out, size, hex.data(), hex.size(), nullptr, &written, nullptr) == 0 &&
         written == size;
}

void hmac(const unsigned char* key, std::size_t key_size, const std::string& message, unsigned char out[32]) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, key, key_size);
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(message.data()), message.size());
  crypto_auth_hmacsha256_final(&state, out);
  sodium_memzero(&state, sizeof state);
}

}  // namespace

std::string random_hex(std::size_t bytes) {
  ensure_sodium();
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  return to_hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

std::string hmac_sha256_hex(const std::string& key, const std::string& message) {
  ensure_sodium();
  unsigned char out[32];
  hmac(reinterpret_cast<const unsigned char*>(key.data()), key.size(), message, out);
  return to_hex(out, sizeof out);
}

FrameAuth::FrameAuth(const RendezvousToken& token, ConnectionSide side) : token_(token.secret), side_(side) {
  nonce_ = random_hex(kNonceBytes);
}

bool FrameAuth::start(const std::string& peer_nonce) {
  unsigned char ours[kNonceBytes], theirs[kNonceBytes];
  if (!from_hex(nonce_, ours, sizeof ours) || !from_hex(peer_nonce, theirs, sizeof theirs)) return false;
  started_ = true;
  if (!enabled()) return true;
  // The agent's nonce first: both sides derive the same key.
  const bool agent = side_ == ConnectionSide::kAgent;
  std::string label(kKeyLabel);
  label.append(reinterpret_cast<const char*>(agent ? ours : theirs), kNonceBytes);
  label.append(reinterpret_cast<const char*>(agent ? theirs : ours), kNonceBytes);
  hmac(reinterpret_cast<const unsigned char*>(token_.data()), token_.size(), label, key_);
  return true;
}

std::string FrameAuth::tag_for(char direction, std::uint64_t sequence, const std::string& covered) const {
  std::string message(1, direction);
  for (int shift = 56; shift >= 0; shift -= 8) message += static_cast<char>((sequence >> shift) & 0xff);
  message += covered;
  unsigned char out[32];
  hmac(key_, sizeof key_, message, out);
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

std::string FrameAuth::sign(const std::string& covered) {
  if (!started_ || !enabled()) throw std::logic_error("FrameAuth::sign before the peer's hello or without a token");
  return tag_for(side_ == ConnectionSide::kAgent ? 'A' : 'S', sent_++, covered);
}

bool FrameAuth::verify(const std::string& covered, const std::string& tag) {
  if (!started_ || !enabled() || tag.size() != 32) return false;
  const std::string expected = tag_for(side_ == ConnectionSide::kAgent ? 'S' : 'A', received_, covered);
  if (crypto_verify_32(reinterpret_cast<const unsigned char*>(expected.data()),
                       reinterpret_cast<const unsigned char*>(tag.data())) != 0) {
    return false;
  }
  ++received_;
  return true;
}

}  // namespace mgtrain::rdzv
