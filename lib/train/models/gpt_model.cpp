// The `gpt` model: a decoder-only transformer (nanoGPT's layout, names and init, without weight tying) with the
// attention written as plain matmuls and an explicit causal mask, so it runs on every supported LibTorch.
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "train/models/layer_model.hpp"
#include "train/models/model_builders.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain {
namespace {

using layers::Dropout;
using layers::Embedding;
using layers::LayerNorm;
using layers::Linear;

struct GptShape {
  int64_t vocab, context, layers, heads, d_model;
  double dropout;
};

class CausalSelfAttention final : public layers::Layer {
 public:
  explicit CausalSelfAttention(const GptShape& s)
      : heads_(s.heads),
        c_attn_(register_module("c_attn", std::make_shared<Linear>(s.d_model, 3 * s.d_model))),
        c_proj_(register_module("c_proj", std::make_shared<Linear>(s.d_model, s.d_model))),
        attn_dropout_(register_module("attn_dropout", std::make_shared<Dropout>(s.dropout))),
        resid_dropout_(register_module("resid_dropout", std::make_shared<Dropout>(s.dropout))) {}

  at::Tensor forward(const at::Tensor& x) override {
    const int64_t batch = x.size(0), time = x.size(1), d = x.size(2), head_dim = d / heads_;
    const auto qkv = c_attn_->forward(x).split(d, 2);
    const auto to_heads = [&](const at::Tensor& t) { return t.view({batch, time, heads_, head_dim}).transpose(1, 2); };
    const at::Tensor q = to_heads(qkv[0]), k = to_heads(qkv[1]), v = to_heads(qkv[2]);  // [B, H, T, hd]
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(1.0 / std::sqrt(static_cast<double>(head_dim)));
    const at::Tensor future = at::ones({time, time}, x.options().dtype(at::kBool)).triu_(1);  // j > i
    scores.masked_fill_(future, -std::numeric_limits<float>::infinity());
    const at::Tensor weights = attn_dropout_->forward(at::softmax(scores, -1));
    const at::Tensor y = at::matmul(weights, v).transpose(1, 2).contiguous().view({batch, time, d});
    return resid_dropout_->forward(c_proj_->forward(y));
  }

 private:
  int64_t heads_;
  std::shared_ptr<Linear> c_attn_, c_proj_;
  std::shared_ptr<Dropout> attn_dropout_, resid_dropout_;
};

class Mlp final : public layers::Layer {
 public:
  explicit Mlp(const GptShape& s)
      : c_fc_(register_module("c_fc", std::make_shared<Linear>(s.d_model, 4 * s.d_model))),
        c_proj_(register_module("c_proj", std::make_shared<Linear>(4 * s.d_model, s.d_model))),
        dropout_(register_module("dropout", std::make_shared<Dropout>(s.dropout))) {}
  at::Tensor forward(const at::Tensor& x) override {
    return dropout_->forward(c_proj_->forward(at::gelu(c_fc_->forward(x))));
  }

 private:
  std::shared_ptr<Linear> c_fc_, c_proj_;
  std::shared_ptr<Dropout> dropout_;
};

// Pre-LN transformer block: x + attn(ln_1(x)), then + mlp(ln_2(.)).
class Block final : public layers::Layer {
 public:
  explicit Block(const GptShape& s)
      : ln_1_(register_module("ln_1", std::make_shared<LayerNorm>(s.d_model))),
        attn_(register_module("attn", std::make_shared<CausalSelfAttention>(s))),
        ln_2_(register_module("ln_2", std::make_shared<LayerNorm>(s.d_model))),
        mlp_(register_module("mlp", std::make_shared<Mlp>(s))) {}
  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor y = x + attn_->forward(ln_1_->forward(x));
    return y + mlp_->forward(ln_2_->forward(y));
  }

 private:
  std::shared_ptr<LayerNorm> ln_1_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<LayerNorm> ln_2_;
  std::shared_ptr<Mlp> mlp_;
};

// nanoGPT's `transformer` ModuleDict: embeddings, blocks, final norm.
class Transformer final : public layers::Layer {
 public:
  explicit Transformer(const GptShape& s)
      : wte_(register_module("wte", std::make_shared<Embedding>(s.vocab, s.d_model))),
        wpe_(register_module("wpe", std::make_shared<Embedding>(s.context, s.d_model))),
        drop_(register_module("drop", std::make_shared<Dropout>(s.dropout))),
        h_(register_module("h", std::make_shared<layers::Sequence>())),
        ln_f_(register_module("ln_f", std::make_shared<LayerNorm>(s.d_model))) {
    for (int64_t i = 0; i < s.layers; ++i) h_->add(std::make_shared<Block>(s));
  }
  at::Tensor forward(const at::Tensor& tokens) override {
    const at::Tensor positions = at::arange(tokens.size(1), tokens.options().dtype(at::kLong));
    const at::Tensor x = drop_->forward(wte_->forward(tokens) + wpe_->forward(positions));
    return ln_f_->forward(h_->forward(x));
  }

 private:
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<layers::Sequence> h_;
  std::shared_ptr<LayerNorm> ln_f_;
};

class Gpt final : public layers::Layer {
 public:
  explicit Gpt(const GptShape& s)
      : context_(s.context),
        transformer_(register_module("transformer", std::make_shared<Transformer>(s))),
        lm_head_(register_module("lm_head", std::make_shared<Linear>(s.d_model, s.vocab, /*bias=*/false))) {
    // nanoGPT's init: N(0, 0.02) for weights and embeddings, zero biases, residual projections (c_proj) with std
    // 0.02/sqrt(2*layers); LayerNorms keep weight 1 and bias 0.
    at::NoGradGuard no_grad;
    for (auto& named : named_parameters(/*recurse=*/true)) {
      const std::string& name = named.key();
      at::Tensor& p = named.value();
      if (name.find(".ln_") != std::string::npos) continue;
      if (ends_with(name, ".bias")) {
        p.zero_();
      } else if (ends_with(name, ".c_proj.weight")) {
        p.normal_(0.0, 0.02 / std::sqrt(2.0 * static_cast<double>(s.layers)));
      } else {
        p.normal_(0.0, 0.02);
      }
    }
  }
  at::Tensor forward(const at::Tensor& tokens) override {
    if (tokens.dim() != 2 || tokens.size(1) < 1 || tokens.size(1) > context_) {
      throw UsageError(
          fmt::format("gpt: inputs must be [batch, T] token ids with 1 <= T <= model.context_length = {}; got [{}]",
                      context_, fmt::join(tokens.sizes(), ", ")));
    }
    return lm_head_->forward(transformer_->forward(tokens));
  }

 private:
  int64_t context_;
  std::shared_ptr<Transformer> transformer_;
  std::shared_ptr<Linear> lm_head_;
};

}  // namespace

std::unique_ptr<Model> build_gpt_model(const ModelConfig& config, const ModelInput& input) {
  const GptShape s{input.num_classes, config.context_length, config.layers,
                   config.heads,      config.d_model,        config.dropout};
  if (s.layers < 1 || s.heads < 1 || s.d_model < 1 || s.context < 1) {
    throw UsageError(
        fmt::format("gpt: layers ({}), heads ({}), d_model ({}) and context_length ({}) must be at least 1", s.layers,
                    s.heads, s.d_model, s.context));
  }
  if (s.d_model % s.heads != 0)
    throw UsageError(fmt::format("gpt: model.heads = {} does not divide model.d_model = {}", s.heads, s.d_model));
  if (input.sample_shape.size() != 1 || input.sample_shape[0] > s.context) {
    throw UsageError(
        fmt::format("gpt: needs token samples [T] with T <= model.context_length = {}; the data set has shape [{}]",
                    s.context, fmt::join(input.sample_shape, ", ")));
  }
  std::string description =
      fmt::format("gpt: {} layers, {} heads, d_model {}, context {}, vocabulary {}{}", s.layers, s.heads, s.d_model,
                  s.context, s.vocab, s.dropout > 0 ? fmt::format(", dropout {}", s.dropout) : "");
  return std::make_unique<LayerModel>(std::make_shared<Gpt>(s), std::move(description));
}

}  // namespace mgtrain
