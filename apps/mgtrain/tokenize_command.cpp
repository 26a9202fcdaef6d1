// `mgtrain tokenize TEXT OUT_DIR`: writes train.bin, val.bin and meta.json for the `tokens` data set.
#include <cstdio>

#include "commands.hpp"
#include "util/error.hpp"
#include "worker_io/token_file.hpp"

namespace mgtrain {

int run_tokenize_command(const TokenizeRequest& request) {
  TokenizeOptions options;
  options.input_path = request.input;
  options.output_dir = request.output_dir;
  options.level = parse_token_level(request.level);
  options.val_fraction = request.val_fraction;
  TokenizeResult result = tokenize_text_file(options);
  std::printf("%s: %lld tokens, vocabulary %lld (%s level)\n", result.train_path.c_str(),
              static_cast<long long>(result.train_tokens), static_cast<long long>(result.vocab_size),
              request.level.c_str());
  if (!result.val_path.empty()) {
    std::printf("%s: %lld tokens\n", result.val_path.c_str(), static_cast<long long>(result.val_tokens));
  }
  std::printf("%s\n", result.meta_path.c_str());
  return exit_code::kSuccess;
}

}  // namespace mgtrain
