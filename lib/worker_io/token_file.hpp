// Turning a text file into token files for the `tokens` data set (nanoGPT's train.bin / val.bin layout: flat
// little-endian uint16 token ids), byte-level or character-level. Torch-free; `mgtrain tokenize` calls it.
#pragma once

#include <cstdint>
#include <string>

namespace mgtrain {

enum class TokenLevel {
  Byte,  // token = byte value, vocabulary 256; any input
  Char,  // token = rank of the Unicode code point among the distinct code points of the text (UTF-8 input)
};

// "byte" or "char"; anything else is a UsageError.
TokenLevel parse_token_level(const std::string& text);

struct TokenizeOptions {
  std::string input_path;  // the text file
  std::string output_dir;  // created if missing
  TokenLevel level = TokenLevel::Char;
  double val_fraction = 0.1;  // [0, 1): this last fraction of the tokens goes to val.bin; 0: no val.bin (a stale
                              // val.bin in output_dir is removed, so the data set falls back to its own 90/10 split)
};

struct TokenizeResult {
  std::string train_path;  // <output_dir>/train.bin
  std::string val_path;    // <output_dir>/val.bin, or empty
  std::string meta_path;   // <output_dir>/meta.json
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int64_t vocab_size = 0;
};

// Writes train.bin, val.bin and meta.json into options.output_dir. meta.json holds "level", "vocab_size" (which the
// tokens data set reads), the token counts and, char-level, "chars": the character of each id in id order.
// Like nanoGPT's prepare.py, the vocabulary is the sorted set of characters of the whole text and the split is by
// position (train = first floor(n * (1 - val_fraction)) tokens). Errors: missing/empty input, invalid UTF-8
// (char level; the message gives the byte offset), more than 65536 distinct characters, a split leaving either part
// empty → UsageError; failed writes → SystemError.
TokenizeResult tokenize_text_file(const TokenizeOptions& options);

}  // namespace mgtrain
