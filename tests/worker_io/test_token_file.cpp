// The text → token file converter behind `mgtrain tokenize`: byte and char levels, meta.json, errors.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "support/temp_dir.hpp"
#include "util/error.hpp"
#include "worker_io/token_file.hpp"

using Catch::Matchers::Contains;
using mgtrain::TokenizeOptions;
using mgtrain::TokenLevel;

namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<uint16_t> read_tokens(const std::string& path) {
  const std::string bytes = read_all(path);
  std::vector<uint16_t> ids;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    ids.push_back(
        static_cast<uint16_t>(static_cast<unsigned char>(bytes[i]) | static_cast<unsigned char>(bytes[i + 1]) << 8));
  }
  return ids;
}

}  // namespace

TEST_CASE("tokenize: byte level") {
  const mgtrain::testing::TempDir dir("mgtrain-tokens");
  write_text(dir / "in.txt", "hello world");
  TokenizeOptions options;
  options.input_path = dir / "in.txt";
  options.output_dir = dir / "out";
  options.level = TokenLevel::Byte;
  options.val_fraction = 0.25;
  const auto result = mgtrain::tokenize_text_file(options);
  CHECK(result.vocab_size == 256);
  CHECK(result.train_tokens == 8);  // floor(11 * 0.75)
  CHECK(result.val_tokens == 3);
  CHECK(read_tokens(result.train_path) == std::vector<uint16_t>{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o'});
  CHECK(read_tokens(result.val_path) == std::vector<uint16_t>{'r', 'l', 'd'});
  const std::string meta = read_all(result.meta_path);
  CHECK_THAT(meta, Contains("\"level\": \"byte\""));
  CHECK_THAT(meta, Contains("\"vocab_size\": 256"));
}

TEST_CASE("tokenize: char level with UTF-8, vocabulary in meta.json") {
  const mgtrain::testing::TempDir dir("mgtrain-tokens");
  write_text(dir / "in.txt",
             "b\"a\nb\xc3\xa9"
             "a");  // b " a \n b é a
  TokenizeOptions options;
  options.input_path = dir / "in.txt";
  options.output_dir = dir.path();
  options.val_fraction = 0;
  write_text(dir / "val.bin", "stale");
  const auto result = mgtrain::tokenize_text_file(options);
  // Sorted code points: \n (0), " (1), a (2), b (3), é (4).
  CHECK(result.vocab_size == 5);
  CHECK(read_tokens(result.train_path) == std::vector<uint16_t>{3, 1, 2, 0, 3, 4, 2});
  CHECK(result.val_path.empty());
  CHECK_FALSE(std::filesystem::exists(dir / "val.bin"));
  const std::string meta = read_all(result.meta_path);
  CHECK_THAT(meta, Contains("\"vocab_size\": 5"));
  CHECK_THAT(meta, Contains("\"chars\": [\"\\n\", \"\\\"\", \"a\", \"b\", \"\xc3\xa9\"]"));
}

TEST_CASE("tokenize: errors") {
  const mgtrain::testing::TempDir dir("mgtrain-tokens");
  TokenizeOptions options;
  options.output_dir = dir / "out";
  options.input_path = dir / "missing.txt";
  CHECK_THROWS_WITH(mgtrain::tokenize_text_file(options), dir / "missing.txt" + ": no such file");
  write_text(dir / "empty.txt", "");
  options.input_path = dir / "empty.txt";
  CHECK_THROWS_WITH(mgtrain::tokenize_text_file(options), dir / "empty.txt" + ": empty file, nothing to tokenize");
  write_text(dir / "latin1.txt", "caf\xe9 au lait");
  options.input_path = dir / "latin1.txt";
  CHECK_THROWS_WITH(mgtrain::tokenize_text_file(options), Contains("latin1.txt: invalid UTF-8 at byte offset 3"));
  options.level = TokenLevel::Byte;
  CHECK_NOTHROW(mgtrain::tokenize_text_file(options));
  write_text(dir / "one.txt", "x");
  options.input_path = dir / "one.txt";
  CHECK_THROWS_AS(mgtrain::tokenize_text_file(options), mgtrain::UsageError);  // cannot split 1 token
  CHECK(mgtrain::parse_token_level("char") == TokenLevel::Char);
  CHECK_THROWS_AS(mgtrain::parse_token_level("bpe"), mgtrain::UsageError);
}
