// Reads TensorBoard event files back for tests, independently of the writer: each record's length and both
// masked CRC32Cs are checked (a mismatch throws naming the record), and the Event protobuf is decoded field
// by field (wall_time, step, file_version, Summary values {tag, simple_value}).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker_io/crc32c.hpp"
#include "worker_io/tfevents_writer.hpp"

namespace mgtrain::testing {

inline std::uint64_t little_endian(const std::string& bytes, std::size_t at, int size) {
  std::uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i)
    value = value << 8 | static_cast<unsigned char>(bytes.at(at + static_cast<std::size_t>(i)));
  return value;
}

// Every record's data; throws naming the record when a CRC or the length is wrong.
inline std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < file.size()) {
    if (file.size() - at < 12)
      throw std::runtime_error("record " + std::to_string(records.size()) + ": truncated header");
    const std::uint64_t length = little_endian(file, at, 8);
    if (little_endian(file, at + 8, 4) != masked_crc32c(file.substr(at, 8))) {
      throw std::runtime_error("record " + std::to_string(records.size()) + ": length CRC mismatch");
    }
    if (file.size() - at - 12 < length + 4)
      throw std::runtime_error("record " + std::to_string(records.size()) + ": truncated data");
    std::string data = file.substr(at + 12, length);
    if (little_endian(file, at + 12 + length, 4) != masked_crc32c(data)) {
      throw std::runtime_error("record " + std::to_string(records.size()) + ": data CRC mismatch");
    }
    records.push_back(std::move(data));
    at += 12 + length + 4;
  }
  return records;
}

struct Field {
  int number = 0;
  int wire_type = 0;
  std::uint64_t scalar = 0;  // varint, fixed32, fixed64
  std::string bytes;         // length-delimited
};

inline std::uint64_t read_varint(const std::string& in, std::size_t& at) {
  std::uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(in.at(at++));
    value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return value;
  }
  throw std::runtime_error("varint too long");
}

inline std::vector<Field> decode_message(const std::string& in) {
  std::vector<Field> fields;
  std::size_t at = 0;
  while (at < in.size()) {
    const std::uint64_t key = read_varint(in, at);
    Field field;
    field.number = static_cast<int>(key >> 3);
    field.wire_type = static_cast<int>(key & 7);
    switch (field.wire_type) {
      case 0:
        field.scalar = read_varint(in, at);
        break;
      case 1:
        field.scalar = little_endian(in, at, 8);
        at += 8;
        break;
      case 5:
        field.scalar = little_endian(in, at, 4);
        at += 4;
        break;
      case 2: {
        const std::uint64_t size = read_varint(in, at);
        field.bytes = in.substr(at, size);
        if (field.bytes.size() != size) throw std::runtime_error("length-delimited field runs past the message");
        at += size;
        break;
      }
      default:
        throw std::runtime_error("unexpected wire type " + std::to_string(field.wire_type));
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

struct DecodedEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;
  std::vector<TfScalar> scalars;
};

inline DecodedEvent decode_event(const std::string& data) {
  DecodedEvent event;
  for (const Field& field : decode_message(data)) {
    if (field.number == 1 && field.wire_type == 1)
      std::memcpy(&event.wall_time, &field.scalar, 8);
    else if (field.number == 2 && field.wire_type == 0)
      event.step = static_cast<std::int64_t>(field.scalar);
    else if (field.number == 3 && field.wire_type == 2)
      event.file_version = field.bytes;
    else if (field.number == 5 && field.wire_type == 2) {
      for (const Field& value : decode_message(field.bytes)) {
        if (value.number != 1) throw std::runtime_error("unexpected Summary field " + std::to_string(value.number));
        TfScalar scalar;
        for (const Field& part : decode_message(value.bytes)) {
          if (part.number == 1 && part.wire_type == 2) scalar.tag = part.bytes;
          if (part.number == 2 && part.wire_type == 5) {
            const auto bits = static_cast<std::uint32_t>(part.scalar);
            std::memcpy(&scalar.value, &bits, 4);
          }
        }
        event.scalars.push_back(scalar);
      }
    } else {
      throw std::runtime_error("unexpected Event field " + std::to_string(field.number));
    }
  }
  return event;
}

}  // namespace mgtrain::testing
