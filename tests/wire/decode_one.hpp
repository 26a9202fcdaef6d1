// For the wire tests: the one message a frame's bytes hold (the decoder must take them all).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv::testing {

inline Message decode_one(const std::string& bytes) {
  MessageDecoder decoder;
  decoder.feed(bytes.data(), bytes.size());
  auto message = decoder.next();
  REQUIRE(message);
  CHECK(decoder.buffered() == 0);
  return *message;
}

}  // namespace mgtrain::rdzv::testing
