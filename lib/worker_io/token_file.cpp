// Text → uint16 token files with a JSON vocabulary description (see token_file.hpp).
#include "worker_io/token_file.hpp"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/json_text.hpp"

namespace mgtrain {
namespace {

std::string read_text(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) {
    const int err = errno;
    if (err == ENOENT) throw UsageError(fmt::format("{}: no such file", path));
    throw SystemError(fmt::format("open {}", path), err);
  }
  std::string text;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, file)) > 0) text.append(chunk, n);
  const bool failed = std::ferror(file);
  std::fclose(file);
  if (failed) throw SystemError(fmt::format("read {}", path), EIO);
  return text;
}

// Decodes UTF-8 strictly (no overlong forms, surrogates or values above U+10FFFF).
std::vector<uint32_t> decode_utf8(const std::string& text, const std::string& path) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  const auto bad = [&](size_t at) {
    return UsageError(
        fmt::format("{}: invalid UTF-8 at byte offset {} (use the byte level for non-UTF-8 text)", path, at));
  };
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    int extra;
    uint32_t cp, min;
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    } else if ((b0 & 0xe0) == 0xc0) {
      extra = 1, cp = b0 & 0x1f, min = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
      extra = 2, cp = b0 & 0x0f, min = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
      extra = 3, cp = b0 & 0x07, min = 0x10000;
    } else {
      throw bad(i);
    }
    if (i + extra >= text.size()) throw bad(i);  // truncated sequence at the end
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xc0) != 0x80) throw bad(i);
      cp = cp << 6 | (b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) throw bad(i);
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}

std::string encode_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | cp >> 6);
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | cp >> 12);
    s += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | cp >> 18);
    s += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
    s += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

void write_file(const std::string& path, const void* data, size_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw SystemError(fmt::format("create {}", path), errno);
  const bool ok = std::fwrite(data, 1, size, file) == size;
  const int err = errno;
  if (std::fclose(file) != 0 || !ok) throw SystemError(fmt::format("write {}", path), ok ? errno : err);
}

void write_tokens(const std::string& path, const std::vector<uint16_t>& tokens, size_t begin, size_t end) {
  std::vector<unsigned char> bytes;
  bytes.reserve(2 * (end - begin));
  for (size_t i = begin; i < end; ++i) {
    bytes.push_back(static_cast<unsigned char>(tokens[i] & 0xff));
    bytes.push_back(static_cast<unsigned char>(tokens[i] >> 8));
  }
  write_file(path, bytes.data(), bytes.size());
}

}  // namespace

TokenLevel parse_token_level(const std::string& text) {
  if (text == "byte") return TokenLevel::Byte;
  if (text == "char") return TokenLevel::Char;
  throw UsageError(fmt::format("token level '{}' is neither 'byte' nor 'char'", text));
}

TokenizeResult tokenize_text_file(const TokenizeOptions& options) {
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
    throw UsageError(fmt::format("validation fraction {} is not in [0, 1)", options.val_fraction));
  }
  const std::string text = read_text(options.input_path);
  if (text.empty()) throw UsageError(fmt::format("{}: empty file, nothing to tokenize", options.input_path));

  std::vector<uint16_t> tokens;
  std::vector<uint32_t> chars;  // char level: code point of each id
  int64_t vocab_size = 256;
  if (options.level == TokenLevel::Byte) {
    tokens.reserve(text.size());
    for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
  } else {
    const std::vector<uint32_t> points = decode_utf8(text, options.input_path);
    std::map<uint32_t, uint16_t> ids;
    for (uint32_t cp : points) ids.emplace(cp, 0);
    if (ids.size() > 65536) {
      throw UsageError(
          fmt::format("{}: {} distinct characters do not fit uint16 token ids (at most 65536); use the byte level",
                      options.input_path, ids.size()));
    }
    for (auto& [cp, id] : ids) {
      id = static_cast<uint16_t>(chars.size());
      chars.push_back(cp);
    }
    tokens.reserve(points.size());
    for (uint32_t cp : points) tokens.push_back(ids[cp]);
    vocab_size = static_cast<int64_t>(chars.size());
  }

  const auto n = static_cast<int64_t>(tokens.size());
  const auto n_train =
      options.val_fraction > 0 ? static_cast<int64_t>(static_cast<double>(n) * (1.0 - options.val_fraction)) : n;
  if (n_train < 1 || (options.val_fraction > 0 && n_train >= n)) {
    throw UsageError(fmt::format("{}: {} tokens are too few to split into train and validation parts with fraction {}",
                                 options.input_path, n, options.val_fraction));
  }

  std::error_code ec;
  std::filesystem::create_directories(options.output_dir, ec);
  if (ec) throw SystemError(fmt::format("create directory {}", options.output_dir), ec.value());

  TokenizeResult result;
  const std::string dir = options.output_dir.empty() ? "." : options.output_dir;
  result.train_path = dir + "/train.bin";
  result.meta_path = dir + "/meta.json";
  result.train_tokens = n_train;
  result.val_tokens = n - n_train;
  result.vocab_size = vocab_size;
  write_tokens(result.train_path, tokens, 0, static_cast<size_t>(n_train));
  if (n_train < n) {
    result.val_path = dir + "/val.bin";
    write_tokens(result.val_path, tokens, static_cast<size_t>(n_train), static_cast<size_t>(n));
  } else {
    std::filesystem::remove(dir + "/val.bin", ec);  // a stale split would not match this train.bin
  }

  std::string meta = "{\n";
  meta += "  \"format\": \"mgtrain tokens v1: little-endian uint16 token ids\",\n";
  meta += fmt::format("  \"source\": {},\n", json_string(options.input_path));
  meta += fmt::format("  \"level\": \"{}\",\n", options.level == TokenLevel::Byte ? "byte" : "char");
  meta += fmt::format("  \"vocab_size\": {},\n", vocab_size);
  meta += fmt::format("  \"train_tokens\": {},\n", result.train_tokens);
  meta += fmt::format("  \"val_tokens\": {}", result.val_tokens);
  if (options.level == TokenLevel::Char) {
    meta += ",\n  \"chars\": [";
    for (size_t i = 0; i < chars.size(); ++i) meta += (i ? ", " : "") + json_string(encode_utf8(chars[i]));
    meta += "]";
  }
  meta += "\n}\n";
  write_file(result.meta_path, meta.data(), meta.size());
  return result;
}

}  // namespace mgtrain
