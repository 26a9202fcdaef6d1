// Collapsing '\r' updates and dropping terminal escape sequences for the per-rank log files.
#include "output/log_line_cleaner.hpp"

namespace mgtrain {
namespace {
constexpr char kEsc = '\x1b';
constexpr char kBel = '\x07';
}  // namespace

bool LogLineCleaner::in_escape(char c) {
  const auto byte = static_cast<unsigned char>(c);
  switch (escape_) {
    case Escape::None:
      if (c == kEsc) {
        escape_ = Escape::Start;
        return true;
      }
      return c == kBel;
    case Escape::Start:  // ESC [ (CSI), ESC ] (OSC), ESC + intermediates + final, or ESC + one final byte
      escape_ = c == '['                         ? Escape::Csi
                : c == ']'                       ? Escape::Osc
                : (byte >= 0x20 && byte <= 0x2F) ? Escape::Intermediate
                                                 : Escape::None;
      return true;
    case Escape::Csi:  // parameters and intermediates up to a final byte 0x40-0x7E
      if (byte >= 0x40 && byte <= 0x7E) escape_ = Escape::None;
      return true;
    case Escape::Intermediate:
      if (byte >= 0x30 && byte <= 0x7E) escape_ = Escape::None;
      return true;
    case Escape::Osc:  // up to BEL or ESC '\'
      if (c == kBel) escape_ = Escape::None;
      if (c == kEsc) escape_ = Escape::OscEsc;
      return true;
    case Escape::OscEsc:
      escape_ = c == '\\' ? Escape::None : Escape::Osc;
      return true;
  }
  return false;
}

std::string LogLineCleaner::feed(std::string_view data) {
  std::string out;
  for (char c : data) {
    if (strip_escapes_ && in_escape(c)) continue;
    if (c == '\n') {
      out += line_;
      out += '\n';
      line_.clear();
      carriage_ = false;
    } else if (c == '\r') {
      carriage_ = true;
    } else {
      if (carriage_) line_.clear();  // the line starts over
      carriage_ = false;
      line_ += c;
      if (line_.size() >= max_line_bytes_) {
        out += line_;
        line_.clear();
      }
    }
  }
  return out;
}

std::string LogLineCleaner::finish() {
  std::string rest;
  rest.swap(line_);
  carriage_ = false;
  escape_ = Escape::None;
  return rest;
}

}  // namespace mgtrain
