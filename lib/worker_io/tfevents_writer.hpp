// Writes TensorBoard event files without TensorFlow or libprotobuf: each record is
// <uint64 length><masked CRC32C of the length><Event proto bytes><masked CRC32C of the bytes>, the first
// Event carries file_version "brain.Event:2", the others Summary values {tag, simple_value}.
// `tensorboard --logdir <dir>` reads the files. Rank 0 of the worker writes one per run attempt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/fd.hpp"

namespace mgtrain {

struct TfScalar {
  std::string tag;  // e.g. "train/loss"
  float value = 0;
};

// The protobuf encoding of an Event (also used by tests to compare with what a reader decodes).
std::string encode_file_version_event(double wall_time, std::string_view file_version);
std::string encode_scalars_event(double wall_time, std::int64_t step, const std::vector<TfScalar>& scalars);
// One record around `data`: length, masked CRC of the length, data, masked CRC of the data.
std::string frame_tfrecord(std::string_view data);

class TfEventsWriter {
 public:
  // Creates `directory` (and its parents) and events.out.tfevents.<unix time>.<hostname>.<pid> in it, then
  // writes the file_version event. Throws SystemError naming the path when it cannot.
  explicit TfEventsWriter(const std::string& directory);
  ~TfEventsWriter();
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  // One Event with all `scalars` at `step`, written with one write(2) (readers never see half a record
  // unless the disk fills). wall_time: Unix seconds. A failed write warns once on stderr and stops writing.
  void add_scalars(std::int64_t step, const std::vector<TfScalar>& scalars, double wall_time);

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  Fd fd_;
};

}  // namespace mgtrain
