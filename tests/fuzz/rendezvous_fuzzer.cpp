// libFuzzer target for the rendezvous server's decoder (lib/wire/rendezvous_message.cpp): any byte
// stream, cut into reads of any size, either decodes into messages or is refused with rdzv::ProtocolError,
// and so is every typed message made from what decoded (join, assign, failure, regroup, a hang's lists) — no crash, no
// other exception, no sanitizer report, no unbounded buffering. A decoded message encodes back to bytes that decode to
// the same message, and no tagged frame passes authentication (frame_auth.hpp) on a connection whose key the input
// cannot know. tests/fuzz/CMakeLists.txt builds it with clang++ -fsanitize=fuzzer,address,undefined; ctest runs a fixed
// number of inputs from rendezvous_corpus/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "multinode/hang_across_nodes.hpp"
#include "wire/frame_auth.hpp"
#include "wire/rendezvous_message.hpp"

using namespace mgtrain::rdzv;

namespace {

void typed(const Message& message) {
  try {
    switch (message.type) {
      case MessageType::kJoin:
        (void)JoinRequest::from(message);
        break;
      case MessageType::kAssign: {
        Assignment assignment = Assignment::from(message);
        (void)assignment.world_size();
        (void)assignment.first_rank(assignment.node_rank);
        break;
      }
      case MessageType::kRegroup:
        (void)message.integer("round");
        (void)message.integer("nodes");
        (void)message.text("reason");
        break;
      case MessageType::kWorkersFailed:
      case MessageType::kHangFound:
        (void)NodeFailure::read_from(message, "cause.").summary();
        break;
      case MessageType::kFinish:
        (void)NodeFailure::read_from(message, "cause.").summary();
        (void)read_failures(message, "waiting.", kMaxListedWaiting);
        break;
      case MessageType::kDiagnosed:
        for (const NodeFailure& rank : read_failures(message, "rank.", kMaxDiagnosedRanks)) (void)rank.summary();
        break;
      default:
        (void)message.integer("exit_code");
        (void)message.number("silent_s");
        (void)message.flag("has_cause");
    }
  } catch (const ProtocolError&) {}
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The first byte picks the read size (1..256), as a socket may deliver any split.
  std::size_t chunk = size == 0 ? 1 : static_cast<std::size_t>(data[0]) + 1;
  const char* bytes = reinterpret_cast<const char*>(data) + (size ? 1 : 0);
  std::size_t left = size ? size - 1 : 0;
  MessageDecoder decoder;
  static const RendezvousToken token{"a fuzzing token, long enough....", "fuzzer"};
  FrameAuth auth(token, ConnectionSide::kServer);
  if (!auth.start(random_hex(16))) __builtin_trap();
  try {
    while (left > 0) {
      std::size_t take = std::min(chunk, left);
      decoder.feed(bytes, take);
      bytes += take;
      left -= take;
      while (std::optional<Frame> decoded = decoder.next_frame()) {
        if (!decoded->tag.empty() && auth.verify(decoded->covered, decoded->tag)) __builtin_trap();
        const std::optional<Message> message = std::move(decoded->message);
        typed(*message);
        MessageDecoder again;
        const std::string frame = encode(*message);
        again.feed(frame.data(), frame.size());
        std::optional<Message> copy = again.next();
        if (!copy || copy->type != message->type || copy->fields != message->fields || again.buffered() != 0)
          __builtin_trap();
      }
      // A peer cannot make the decoder hold more than one frame's worth of bytes.
      if (decoder.buffered() > kHeaderBytes + kMaxPayloadBytes + 256) __builtin_trap();
    }
  } catch (const ProtocolError&) {}
  return 0;
}
