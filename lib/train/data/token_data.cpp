// Reading and windowing uint16 token files into an in-memory data set (see token_data.hpp).
#include "train/data/token_data.hpp"

#include <algorithm>
#include <cctype>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "train/data/data_file.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::vector<uint16_t> read_token_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_data_file(path);
  if (bytes.empty()) throw UsageError(fmt::format("{}: empty token file", path));
  if (bytes.size() % 2 != 0) {
    throw UsageError(
        fmt::format("{}: size {} bytes is odd; a token file holds little-endian uint16 token ids (2 bytes each)", path,
                    bytes.size()));
  }
  std::vector<uint16_t> tokens(bytes.size() / 2);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(bytes[2 * i] | bytes[2 * i + 1] << 8);
  return tokens;
}

// "vocab_size" of a meta.json file, or 0 if the file does not exist.
int64_t vocab_size_from_meta(const std::string& meta_path) {
  if (!data_file_exists(meta_path)) return 0;
  const std::vector<uint8_t> bytes = read_data_file(meta_path);
  const std::string text(bytes.begin(), bytes.end());
  const std::string key = "\"vocab_size\"";
  auto pos = text.find(key);
  if (pos != std::string::npos) {
    pos = text.find_first_not_of(" \t\r\n", pos + key.size());
    if (pos != std::string::npos && text[pos] == ':') {
      pos = text.find_first_not_of(" \t\r\n", pos + 1);
      int64_t value = 0;
      size_t digits = 0;
      while (pos + digits < text.size() && std::isdigit(static_cast<unsigned char>(text[pos + digits])) && digits < 7) {
        value = value * 10 + (text[pos + digits] - '0');
        ++digits;
      }
      if (digits > 0 && value >= 1 && value <= 65536) return value;
    }
  }
  throw UsageError(fmt::format("{}: no valid \"vocab_size\" (an integer 1..65536) found", meta_path));
}

void check_ids(const std::vector<uint16_t>& tokens, int64_t vocab_size, const std::string& path,
               const std::string& meta_path) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab_size) {
      throw UsageError(fmt::format("{}: token id {} at position {} is outside the vocabulary of {} declared by {}",
                                   path, tokens[i], i, vocab_size, meta_path));
    }
  }
}

class TokenData final : public DataSource {
 public:
  TokenData(std::string description, std::vector<uint16_t> tokens, int64_t context_length, int64_t vocab_size)
      : description_(std::move(description)),
        tokens_(std::move(tokens)),
        context_(context_length),
        vocab_(vocab_size) {}

  int64_t size() const override { return (static_cast<int64_t>(tokens_.size()) - 1) / context_; }
  std::vector<int64_t> sample_shape() const override { return {context_}; }
  int64_t num_classes() const override { return vocab_; }
  Batch make_batch(const std::vector<int64_t>& indices) const override {
    check_sample_indices(indices, size());
    const int64_t batch = static_cast<int64_t>(indices.size());
    at::Tensor inputs = at::empty({batch, context_}, at::kLong);
    at::Tensor targets = at::empty({batch, context_}, at::kLong);
    int64_t* in = inputs.data_ptr<int64_t>();
    int64_t* out = targets.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      const uint16_t* window = tokens_.data() + indices[b] * context_;
      for (int64_t t = 0; t < context_; ++t) {
        in[b * context_ + t] = window[t];
        out[b * context_ + t] = window[t + 1];
      }
    }
    return Batch{inputs, targets};
  }
  std::string description() const override { return description_; }

 private:
  std::string description_;
  std::vector<uint16_t> tokens_;
  int64_t context_;
  int64_t vocab_;
};

}  // namespace

std::unique_ptr<DataSource> open_token_data(const std::string& train_path, Split split, int64_t context_length) {
  if (context_length < 1)
    throw UsageError(fmt::format("tokens: context length must be at least 1 (got {})", context_length));
  const std::string directory = directory_of(train_path);
  const std::string val_path = directory + "/val.bin";
  const bool has_val = data_file_exists(val_path) && !same_file(val_path, train_path);

  std::vector<uint16_t> train = read_token_file(train_path);
  std::vector<uint16_t> val;
  if (has_val) val = read_token_file(val_path);

  const std::string meta_path = directory + "/meta.json";
  int64_t vocab_size = vocab_size_from_meta(meta_path);
  std::string vocab_origin = meta_path;
  if (vocab_size > 0) {
    check_ids(train, vocab_size, train_path, meta_path);
    check_ids(val, vocab_size, val_path, meta_path);
  } else {
    const auto max_train = *std::max_element(train.begin(), train.end());
    const auto max_val = val.empty() ? uint16_t{0} : *std::max_element(val.begin(), val.end());
    vocab_size = int64_t{std::max(max_train, max_val)} + 1;
    vocab_origin = "largest token id + 1";
  }

  std::string source_path = train_path;
  std::string part;
  std::vector<uint16_t> tokens;
  if (has_val) {
    tokens = split == Split::Train ? std::move(train) : std::move(val);
    if (split == Split::Test) source_path = val_path;
  } else {
    const size_t cut = train.size() - train.size() / 10;
    tokens = split == Split::Train ? std::vector<uint16_t>(train.begin(), train.begin() + cut)
                                   : std::vector<uint16_t>(train.begin() + cut, train.end());
    part = split == Split::Train ? " (first 90%; no val.bin beside it)" : " (last 10%; no val.bin beside it)";
  }
  const int64_t count = tokens.size();
  if (count < context_length + 1) {
    throw UsageError(fmt::format("{}{}: {} tokens are fewer than one sample of context_length + 1 = {} tokens",
                                 source_path, part, count, context_length + 1));
  }
  std::string description =
      fmt::format("tokens {}{} ({}): {} tokens, {} windows of {}, vocabulary {} ({})", source_path, part,
                  split_name(split), count, (count - 1) / context_length, context_length, vocab_size, vocab_origin);
  return std::make_unique<TokenData>(std::move(description), std::move(tokens), context_length, vocab_size);
}

}  // namespace mgtrain
