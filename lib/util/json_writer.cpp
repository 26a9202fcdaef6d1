// JSON text output for reports.
#include "util/json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace mgtrain {
namespace {

// Length of the valid UTF-8 sequence starting at text[at], or 0 if invalid.
std::size_t utf8_sequence_length(std::string_view text, std::size_t at) {
  unsigned char lead = static_cast<unsigned char>(text[at]);
  std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length == 0 || at + length > text.size()) return 0;
  for (std::size_t i = 1; i < length; ++i)
    if ((static_cast<unsigned char>(text[at + i]) & 0xC0) != 0x80) return 0;
  return length;
}

}  // namespace

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (std::size_t at = 0; at < text.size();) {
    char c = text[at];
    switch (c) {
      case '"': out += "\\\""; ++at; continue;
      case '\\': out += "\\\\"; ++at; continue;
      case '\n': out += "\\n"; ++at; continue;
      case '\r': out += "\\r"; ++at; continue;
      case '\t': out += "\\t"; ++at; continue;
      default: break;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned char>(c));
      out += escape;
      ++at;
      continue;
    }
    std::size_t length = utf8_sequence_length(text, at);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++at;
      continue;
    }
    out.append(text.substr(at, length));
    at += length;
  }
  out += '"';
  return out;
}

void JsonWriter::newline() {
  if (indent_ <= 0) return;
  out_ += '\n';
  out_.append(first_in_container_.size() * static_cast<std::size_t>(indent_), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (first_in_container_.empty()) return;
  if (!first_in_container_.back()) out_ += ',';
  first_in_container_.back() = false;
  newline();
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  first_in_container_.push_back(true);
  return *this;
}

void JsonWriter::close_container(char closing) {
  bool empty = first_in_container_.back();
  first_in_container_.pop_back();
  if (!empty) newline();
  out_ += closing;
}

JsonWriter& JsonWriter::end_object() {
  close_container('}');
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  first_in_container_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  close_container(']');
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  before_value();
  out_ += json_quote(name);
  out_ += indent_ > 0 ? ": " : ":";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  before_value();
  out_ += json_quote(text);
  return *this;
}

JsonWriter& JsonWriter::value(long long number) {
  before_value();
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  before_value();
  if (!std::isfinite(number)) {
    out_ += "null";
    return *this;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", number);
  out_ += buffer;
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  before_value();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

}  // namespace mgtrain
