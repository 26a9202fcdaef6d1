// File tails for reports.
#include "output/file_tail.hpp"

#include <fstream>

#include "util/strings.hpp"

namespace mgtrain {

std::vector<std::string> read_last_lines(const std::string& path, std::size_t count, std::size_t max_bytes) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return {};
  std::streamoff size = file.tellg();
  std::streamoff start =
      size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  file.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(file.gcount()));
  if (start > 0) {  // the first line is probably cut: drop it
    std::size_t newline = text.find('\n');
    text.erase(0, newline == std::string::npos ? text.size() : newline + 1);
  }
  std::vector<std::string> lines = split_lines(text);
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(count));
  return lines;
}

std::optional<std::string> read_small_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::string text(max_bytes, '\0');
  file.read(text.data(), static_cast<std::streamsize>(max_bytes));
  text.resize(static_cast<std::size_t>(file.gcount()));
  return text;
}

}  // namespace mgtrain
