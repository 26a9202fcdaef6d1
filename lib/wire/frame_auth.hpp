// Authentication of the rendezvous frames (docs/multinode.md#the-rendezvous-token). A job's token is a
// shared secret; each connection opens with a hello from both sides carrying a fresh random nonce, and
// every later frame carries HMAC-SHA256 under a key derived from the token and both nonces, over a
// direction byte, the frame's sequence number on that connection and its bytes. So a frame from another
// connection (a replay), a reordered or reflected frame, and any frame made without the token fail.
// libsodium does the cryptography.
#pragma once

#include <cstdint>
#include <string>

namespace mgtrain::rdzv {

// The job's secret; none when `secret` is empty. `source` says where it came from, for messages
// ("MGTRAIN_RDZV_TOKEN", "launch.rdzv_token_file /etc/job.key", ...).
struct RendezvousToken {
  std::string secret;
  std::string source;
  bool set() const { return !secret.empty(); }
};

// The shortest token accepted (a guessable token authenticates nothing).
inline constexpr std::size_t kMinTokenBytes = 16;

enum class ConnectionSide { kServer, kAgent };

// One connection's authentication state.
class FrameAuth {
 public:
  FrameAuth(const RendezvousToken& token, ConnectionSide side);

  bool enabled() const { return !token_.empty(); }
  // This side's nonce for its hello (32 hex digits).
  const std::string& nonce() const { return nonce_; }
  // The peer's hello arrived: derives the connection's key. Returns false for a nonce that is not 32 hex digits.
  bool start(const std::string& peer_nonce);
  bool started() const { return started_; }

  // The tag of this side's next frame (`covered`: its header and payload).
  std::string sign(const std::string& covered);
  // Whether `tag` is the peer's next frame's; only a frame that passes advances the peer's sequence.
  bool verify(const std::string& covered, const std::string& tag);

 private:
  std::string tag_for(char direction, std::uint64_t sequence, const std::string& covered) const;

  std::string token_;
  ConnectionSide side_;
  std::string nonce_;
  bool started_ = false;
  unsigned char key_[32] = {};
  std::uint64_t sent_ = 0;
  std::uint64_t received_ = 0;
};

// `bytes` random bytes as hex digits (the kernel's random source, through libsodium).
std::string random_hex(std::size_t bytes);
// HMAC-SHA256 of `message` under `key`, as 64 hex digits (derived tokens).
std::string hmac_sha256_hex(const std::string& key, const std::string& message);

}  // namespace mgtrain::rdzv
