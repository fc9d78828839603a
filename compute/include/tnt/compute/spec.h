#pragma once
// Plain descriptions of layers and models. A ModelSpec is what a TOML model
// file (conf/models/*.toml) parses into, what checkpoints store, and what the
// C++ builders produce; Model is always built from one.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tnt/compute/tensor.h"

namespace tnt::compute {

using SpecValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;

struct LayerSpec {
  std::string type;                          // "dense", "conv2d", ... (see README)
  std::map<std::string, SpecValue> options;  // type-specific, checked when built
  // Only "residual" uses these: branches[0] is the main branch, branches[1] the
  // shortcut (empty = identity).
  std::vector<std::vector<LayerSpec>> branches;
};

// Note [Sequence-to-sequence form]: a ModelSpec with decoder layers is an
// encoder-decoder. `layers` is then the encoder, fed the source tokens; the
// decoder chain is fed the target tokens (teacher forcing) and its output is
// the model's. Decoder layers of type "cross_attention" attend to the
// encoder's output (the memory), masked by the source lengths; everywhere
// else a decoder is an ordinary chain. Parameters: the encoder's, then the
// decoder's (Note [Parameter order] in model.h). For token inputs (a chain
// that starts with an embedding) the input's length T is the longest
// sequence the model takes; a batch may be padded to any length in [1, T].
struct ModelSpec {
  std::string name;
  Shape input;  // one sample, without the batch dimension: {C, H, W} or {features}
  std::vector<LayerSpec> layers;
  // Sequence-to-sequence form: empty for a plain chain.
  Shape decoder_input = {};  // {T_target}
  std::vector<LayerSpec> decoder = {};

  bool is_sequence_to_sequence() const { return !decoder.empty(); }
};

// The bounds of a model file (Note [Model file bounds] in model_toml.cpp); parse_model_toml and
// load_model_toml refuse anything beyond them, checkpoints' models included.
inline constexpr std::size_t kMaxModelFileBytes = 1 << 20;
inline constexpr std::size_t kMaxModelNesting = 64;  // residual blocks inside residual blocks
inline constexpr std::size_t kMaxModelLayers = 10'000;

// TOML text <-> ModelSpec. Errors name the file (or "<string>") and the key.
ModelSpec parse_model_toml(const std::string& text, const std::string& origin = "<string>");
ModelSpec load_model_toml(const std::string& path);
std::string to_toml(const ModelSpec& spec);

// C++ builders for the layer types (options as in the TOML files).
namespace layers {
struct Conv2DOptions {
  int64_t filters = 0;
  std::vector<int64_t> kernel{3, 3};
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0};
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
  std::string init = "glorot_uniform";  // or "he_normal", "he_uniform", "glorot_normal"
};
LayerSpec dense(int64_t units, bool bias = true, const std::string& init = "glorot_uniform");
LayerSpec conv2d(const Conv2DOptions& options);
LayerSpec max_pool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);  // stride 0 = kernel
LayerSpec avg_pool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
LayerSpec global_avg_pool2d();
// "relu", "leaky_relu" (alpha), "elu" (alpha), "tanh", "sigmoid", "gelu", "swish", "linear"
LayerSpec activation(const std::string& function, double alpha = 0.0);
LayerSpec batch_norm(double momentum = 0.99, double epsilon = 1e-3);
LayerSpec dropout(double rate, int64_t seed = 0);
LayerSpec flatten();
// out = activation(main(x) + shortcut(x)); an empty shortcut is the identity.
LayerSpec residual(std::vector<LayerSpec> main, std::vector<LayerSpec> shortcut = {},
                   const std::string& activation = "relu");

// Sequence layers, on {N, T, features} (compute/README.md, "Sequences").
// Token ids {N, T} (integers as floats) -> {N, T, dim}, times `scale`.
LayerSpec embedding(int64_t vocab, int64_t dim, double scale = 1.0, const std::string& init = "glorot_uniform");
LayerSpec positional_encoding();  // adds the sinusoidal encoding
LayerSpec layer_norm(double epsilon = 1e-5);
// Dense over the last axis, the same weights at every position.
LayerSpec position_wise_dense(int64_t units, bool bias = true, const std::string& init = "glorot_uniform");
// Multi-head self-attention; padding masks from the batch's sequence lengths.
LayerSpec self_attention(int64_t heads, bool causal = false, bool bias = true);
// Encoder-decoder attention: queries from the decoder, keys and values from
// the encoder's output (decoder layers only; Note [Sequence-to-sequence form]).
LayerSpec cross_attention(int64_t heads, bool bias = true);
}  // namespace layers

}  // namespace tnt::compute
