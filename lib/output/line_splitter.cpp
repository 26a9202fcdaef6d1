// Line splitting with a bounded buffer for the console prefixer.
#include "output/line_splitter.hpp"

namespace mgtrain {
namespace {

bool is_utf8_continuation(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

// Largest cut <= limit that does not split a UTF-8 sequence (falls back to `limit` for non-UTF-8).
std::size_t cut_point(std::string_view text, std::size_t limit) {
  std::size_t cut = limit;
  for (int back = 0; back < 3 && cut > 1 && cut < text.size() && is_utf8_continuation(text[cut]); ++back) --cut;
  if (cut < text.size() && is_utf8_continuation(text[cut])) return limit;
  return cut;
}

}  // namespace

LineSplitter::LineSplitter(std::size_t max_line_bytes) : max_line_bytes_(max_line_bytes == 0 ? 1 : max_line_bytes) {}

void LineSplitter::feed(std::string_view data, const LineSink& sink) {
  while (!data.empty()) {
    std::size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(data);
      deliver_overlong(sink);
      return;
    }
    if (pending_.empty()) {
      std::string_view line = data.substr(0, newline);
      while (line.size() > max_line_bytes_) {
        std::size_t cut = cut_point(line, max_line_bytes_);
        sink(line.substr(0, cut));
        line.remove_prefix(cut);
      }
      sink(line);
    } else {
      pending_.append(data.substr(0, newline));
      deliver_overlong(sink);
      sink(pending_);
      pending_.clear();
    }
    data.remove_prefix(newline + 1);
  }
}

void LineSplitter::deliver_overlong(const LineSink& sink) {
  std::size_t start = 0;
  while (pending_.size() - start > max_line_bytes_) {
    std::string_view rest = std::string_view(pending_).substr(start);
    std::size_t cut = cut_point(rest, max_line_bytes_);
    sink(rest.substr(0, cut));
    start += cut;
  }
  if (start > 0) pending_.erase(0, start);
}

void LineSplitter::finish(const LineSink& sink) {
  if (pending_.empty()) return;
  sink(pending_);
  pending_.clear();
}

}  // namespace mgtrain
