// TensorBoard event records and the few protobuf fields they need, encoded by hand (see tfevents_writer.hpp).
#include "worker_io/tfevents_writer.hpp"
#include "util/log.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "util/error.hpp"
#include "worker_io/crc32c.hpp"

namespace mgtrain {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | wire_type);
}

void put_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, int field, double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_tag(out, field, kFixed64);
  put_little_endian(out, bits, 8);
}

void put_float(std::string& out, int field, float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_tag(out, field, kFixed32);
  put_little_endian(out, bits, 4);
}

// Event fields (tensorflow/core/util/event.proto): wall_time = 1, step = 2, file_version = 3, summary = 5.
// Summary: repeated Value value = 1; Summary.Value: tag = 1, simple_value = 2.
std::string event_header(double wall_time, std::int64_t step) {
  std::string out;
  put_double(out, 1, wall_time);
  if (step != 0) {
    put_tag(out, 2, kVarint);
    put_varint(out, static_cast<std::uint64_t>(step));
  }
  return out;
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

std::string encode_file_version_event(double wall_time, std::string_view file_version) {
  std::string out = event_header(wall_time, 0);
  put_bytes(out, 3, file_version);
  return out;
}

std::string encode_scalars_event(double wall_time, std::int64_t step, const std::vector<TfScalar>& scalars) {
  std::string summary;
  for (const TfScalar& scalar : scalars) {
    std::string value;
    put_bytes(value, 1, scalar.tag);
    put_float(value, 2, scalar.value);
    put_bytes(summary, 1, value);
  }
  std::string out = event_header(wall_time, step);
  put_bytes(out, 5, summary);
  return out;
}

std::string frame_tfrecord(std::string_view data) {
  std::string length;
  put_little_endian(length, data.size(), 8);
  std::string out = length;
  put_little_endian(out, masked_crc32c(length), 4);
  out.append(data);
  put_little_endian(out, masked_crc32c(data), 4);
  return out;
}

TfEventsWriter::TfEventsWriter(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error)
    throw SystemError(
        "cannot create the TensorBoard directory " + directory + " (set log.tensorboard: false to go without)",
        error.value());
  const double now = static_cast<double>(std::time(nullptr));
  path_ = directory + "/events.out.tfevents." + std::to_string(static_cast<long long>(now)) + "." + hostname() + "." +
          std::to_string(getpid());
  fd_.reset(::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd_)
    throw SystemError(
        "cannot create the TensorBoard event file " + path_ + " (set log.tensorboard: false to go without)", errno);
  write_record(encode_file_version_event(now, "brain.Event:2"));
}

TfEventsWriter::~TfEventsWriter() = default;

void TfEventsWriter::add_scalars(std::int64_t step, const std::vector<TfScalar>& scalars, double wall_time) {
  if (scalars.empty()) return;
  write_record(encode_scalars_event(wall_time, step, scalars));
}

void TfEventsWriter::write_record(const std::string& data) {
  if (!fd_) return;
  if (const std::string problem = write_fully(fd_.get(), frame_tfrecord(data)); !problem.empty()) {
    log::warn("cannot write the TensorBoard event file {} ({}); no more TensorBoard data this run", path_, problem);
    fd_.reset();
  }
}

}  // namespace mgtrain
