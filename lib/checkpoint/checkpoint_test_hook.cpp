// The checkpoint writer's test-only pause (see checkpoint_test_hook.hpp).
#include "checkpoint/checkpoint_test_hook.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/log.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

[[noreturn]] void pause_forever(const std::string& where) {
  std::fflush(stderr);
  log::write_all(STDERR_FILENO, "mgtrain-test: checkpoint write paused at " + where + "\n");
  for (;;) ::pause();
}

}  // namespace

CheckpointTestHook CheckpointTestHook::from_environment() {
  CheckpointTestHook hook;
  if (const char* text = std::getenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE"); text && *text) {
    const std::optional<std::int64_t> value = parse_int(text);
    if (!value || *value < 0) {
      throw UsageError(fmt::format("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE={}: not a byte offset", text));
    }
    hook.at_byte_ = static_cast<std::uint64_t>(*value);
  }
  if (const char* text = std::getenv("MGTRAIN_TEST_CHECKPOINT_PAUSE_AT"); text && *text) {
    hook.at_stage_ = text;
    if (hook.at_stage_ != "before-fsync" && hook.at_stage_ != "before-rename" && hook.at_stage_ != "before-dir-fsync") {
      throw UsageError(fmt::format(
          "MGTRAIN_TEST_CHECKPOINT_PAUSE_AT={}: not one of before-fsync, before-rename, before-dir-fsync", text));
    }
  }
  return hook;
}

void CheckpointTestHook::write(AtomicFileWriter& file, const void* data, std::size_t size) const {
  if (at_byte_ && *at_byte_ <= file.bytes_written() + size) {
    file.write(data, static_cast<std::size_t>(*at_byte_ - file.bytes_written()));
    pause_forever(fmt::format("byte {}", *at_byte_));
  }
  file.write(data, size);
}

void CheckpointTestHook::arm_commit_stages(AtomicFileWriter& file) const {
  if (at_stage_.empty()) return;
  file.set_commit_stage_callback([stage = at_stage_](std::string_view now) {
    if (now == stage) pause_forever(stage);
  });
}

}  // namespace mgtrain
