// The checkpoint writer's one test seam: pausing a write at an exact instant so that a kill-at-any-instant test
// can SIGKILL the writer there (tests/checkpoint_jobs/test_checkpoint_processes.cpp). It is the only test hook in
// the checkpoint code; production never sets its variables, and then it is inert (a plain append, no callback).
//   MGTRAIN_TEST_CHECKPOINT_PAUSE_AT_BYTE=N   once N bytes of the temporary file are written (a write is split
//                                              at exactly N), the writer prints
//                                              "mgtrain-test: checkpoint write paused at byte N" to stderr and
//                                              blocks forever.
//   MGTRAIN_TEST_CHECKPOINT_PAUSE_AT=STAGE     the same at a stage of AtomicFileWriter::commit(): before-fsync
//                                              (all bytes and the final checksum written), before-rename,
//                                              before-dir-fsync; the line is "mgtrain-test: checkpoint write paused
//                                              at STAGE".
// The variables are read once per write_checkpoint_file call, before anything is created (an invalid value is
// a UsageError and no file appears).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "util/atomic_file.hpp"

namespace mgtrain {

class CheckpointTestHook {
 public:
  // Reads both variables. Throws UsageError for a value that is not a byte offset or a known stage.
  static CheckpointTestHook from_environment();

  // file.write(data, size), pausing inside it when the byte hook's offset falls in [written, written + size].
  void write(AtomicFileWriter& file, const void* data, std::size_t size) const;
  // Makes file.commit() pause at the stage hook's stage (nothing when it is unset).
  void arm_commit_stages(AtomicFileWriter& file) const;

 private:
  std::optional<std::uint64_t> at_byte_;
  std::string at_stage_;
};

}  // namespace mgtrain
