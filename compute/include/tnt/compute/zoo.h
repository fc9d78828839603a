#pragma once
// Model zoo: ModelSpecs of well-known networks (build with Model(spec)).
#include <cstdint>
#include <string>
#include <vector>

#include "tnt/compute/spec.h"

namespace tnt::compute::zoo {

// Dense layers with ReLU between them, on flattened input.
ModelSpec mlp(const Shape& input = {1, 28, 28}, const std::vector<int64_t>& hidden = {256, 128}, int64_t classes = 10);
// LeCun et al. 1998 with ReLU and max pooling: conv 6@5x5 (pad 2), pool,
// conv 16@5x5, pool, dense 120, dense 84, dense classes.
ModelSpec lenet5(const Shape& input = {1, 28, 28}, int64_t classes = 10);
// He et al. 2016, CIFAR variant: 3 stages x 3 basic blocks (16, 32, 64
// filters), projection shortcuts where the shape changes. 32x32x3 input.
ModelSpec resnet20(int64_t classes = 10);
// He et al. 2016 bottleneck network [3, 4, 6, 3], stride on the 3x3
// convolution (v1.5). 224x224x3 input.
ModelSpec resnet50(int64_t classes = 1000);

// Vaswani et al. 2017's encoder-decoder Transformer (Note [Sequence-to-sequence
// form] in spec.h) over one shared vocabulary of `vocab` tokens, with separate
// source and target embeddings (scaled by sqrt(d_model)), sinusoidal
// positions, and an output projection to the vocabulary. Pre-norm by default
// (layer norm at the start of every residual branch and once after each
// stack: trains without a long warm-up); pre_norm = false gives the paper's
// arrangement (layer norm after every residual sum). Every dropout layer has
// its own seed, so no two share a mask.
struct TransformerOptions {
  int64_t vocab = 132;  // the FreeDict character vocabulary
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t d_ff = 512;
  int64_t encoder_layers = 2;
  int64_t decoder_layers = 2;
  double dropout = 0.1;
  int64_t max_source_length = 64;  // longest sequences, </s> and <s> included
  int64_t max_target_length = 64;
  bool pre_norm = true;
};
ModelSpec transformer(const TransformerOptions& options = {});
// For tests: d_model 16, 2 heads, d_ff 32, one layer each side, dropout 0.1.
ModelSpec transformer_tiny(int64_t vocab = 24);

// "mlp", "lenet5", "resnet20", "resnet50", "transformer", "transformer_tiny" with their defaults.
ModelSpec by_name(const std::string& name);
std::vector<std::string> names();

}  // namespace tnt::compute::zoo
