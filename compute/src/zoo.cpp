#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

#include <cmath>
#include <stdexcept>

namespace tnt::compute::zoo {

using namespace layers;

namespace {

LayerSpec conv(int64_t filters, int64_t kernel, int64_t stride, int64_t padding, bool bias = false) {
  Conv2DOptions o;
  o.filters = filters;
  o.kernel = {kernel, kernel};
  o.stride = {stride, stride};
  o.padding = {padding, padding};
  o.bias = bias;
  o.init = "he_normal";
  return conv2d(o);
}

LayerSpec relu() { return activation("relu"); }

LayerSpec basic_block(int64_t filters, int64_t stride, bool project) {
  std::vector<LayerSpec> main{conv(filters, 3, stride, 1), batch_norm(), relu(), conv(filters, 3, 1, 1), batch_norm()};
  std::vector<LayerSpec> shortcut;
  if (project) {
    shortcut = {conv(filters, 1, stride, 0), batch_norm()};
  }
  return residual(main, shortcut, "relu");
}

LayerSpec bottleneck(int64_t width, int64_t stride, bool project) {
  std::vector<LayerSpec> main{conv(width, 1, 1, 0),      batch_norm(), relu(),
                              conv(width, 3, stride, 1), batch_norm(), relu(),
                              conv(width * 4, 1, 1, 0),  batch_norm()};
  std::vector<LayerSpec> shortcut;
  if (project) {
    shortcut = {conv(width * 4, 1, stride, 0), batch_norm()};
  }
  return residual(main, shortcut, "relu");
}

// Transformer sub-layers: x + sublayer(LN(x)) (pre-norm) or LN(x + sublayer(x)) (post-norm).
class TransformerBuilder {
 public:
  explicit TransformerBuilder(const TransformerOptions& o) : o_(o) {}

  void sublayer(std::vector<LayerSpec>& stack, std::vector<LayerSpec> body) {
    if (o_.dropout > 0.0) {
      body.push_back(dropout());
    }
    if (o_.pre_norm) {
      body.insert(body.begin(), layer_norm());
    }
    stack.push_back(residual(std::move(body), {}, "linear"));
    if (!o_.pre_norm) {
      stack.push_back(layer_norm());
    }
  }

  void feed_forward(std::vector<LayerSpec>& stack) {
    sublayer(stack,
             {position_wise_dense(o_.d_ff, true, "he_uniform"), activation("relu"), position_wise_dense(o_.d_model)});
  }

  // Embedding, positions and dropout: the start of both stacks.
  std::vector<LayerSpec> inputs() {
    std::vector<LayerSpec> stack{embedding(o_.vocab, o_.d_model, std::sqrt(static_cast<double>(o_.d_model))),
                                 positional_encoding()};
    if (o_.dropout > 0.0) {
      stack.push_back(dropout());
    }
    return stack;
  }

  void finish(std::vector<LayerSpec>& stack) {
    if (o_.pre_norm) {
      stack.push_back(layer_norm());
    }
  }

  LayerSpec dropout() { return layers::dropout(o_.dropout, ++dropout_seed_); }

 private:
  const TransformerOptions& o_;
  int64_t dropout_seed_ = 0;
};

}  // namespace

ModelSpec transformer(const TransformerOptions& o) {
  if (o.vocab < 5 || o.d_model < 1 || o.heads < 1 || o.d_model % o.heads != 0 || o.d_ff < 1 || o.encoder_layers < 1 ||
      o.decoder_layers < 1 || !(o.dropout >= 0.0 && o.dropout < 1.0) || o.max_source_length < 1 ||
      o.max_target_length < 1) {
    throw ConfigError(
        "transformer: need vocab >= 5, heads dividing d_model, d_ff and layers >= 1, dropout in [0, 1) "
        "and positive lengths");
  }
  TransformerBuilder b(o);
  ModelSpec spec{"transformer", {o.max_source_length}, b.inputs(), {o.max_target_length}, {}};
  for (int64_t i = 0; i < o.encoder_layers; ++i) {
    b.sublayer(spec.layers, {self_attention(o.heads)});
    b.feed_forward(spec.layers);
  }
  b.finish(spec.layers);
  spec.decoder = b.inputs();  // dropout seeds in file order: the encoder's first
  for (int64_t i = 0; i < o.decoder_layers; ++i) {
    b.sublayer(spec.decoder, {self_attention(o.heads, true)});
    b.sublayer(spec.decoder, {cross_attention(o.heads)});
    b.feed_forward(spec.decoder);
  }
  b.finish(spec.decoder);
  spec.decoder.push_back(position_wise_dense(o.vocab));
  return spec;
}

ModelSpec transformer_tiny(int64_t vocab) {
  ModelSpec spec = transformer({.vocab = vocab,
                                .d_model = 16,
                                .heads = 2,
                                .d_ff = 32,
                                .encoder_layers = 1,
                                .decoder_layers = 1,
                                .dropout = 0.1,
                                .max_source_length = 32,
                                .max_target_length = 32});
  spec.name = "transformer_tiny";
  return spec;
}

ModelSpec mlp(const Shape& input, const std::vector<int64_t>& hidden, int64_t classes) {
  ModelSpec spec{"mlp", input, {flatten()}};
  for (int64_t units : hidden) {
    spec.layers.push_back(dense(units));
    spec.layers.push_back(relu());
  }
  spec.layers.push_back(dense(classes));
  return spec;
}

ModelSpec lenet5(const Shape& input, int64_t classes) {
  return {"lenet5",
          input,
          {conv(6, 5, 1, 2, true), relu(), max_pool2d(2), conv(16, 5, 1, 0, true), relu(), max_pool2d(2), flatten(),
           dense(120), relu(), dense(84), relu(), dense(classes)}};
}

ModelSpec resnet20(int64_t classes) {
  ModelSpec spec{"resnet20", {3, 32, 32}, {conv(16, 3, 1, 1), batch_norm(), relu()}};
  int64_t in = 16;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const int64_t filters = 16 << stage;
    for (int64_t block = 0; block < 3; ++block) {
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      spec.layers.push_back(basic_block(filters, stride, stride != 1 || in != filters));
      in = filters;
    }
  }
  spec.layers.push_back(global_avg_pool2d());
  spec.layers.push_back(dense(classes));
  return spec;
}

ModelSpec resnet50(int64_t classes) {
  ModelSpec spec{"resnet50", {3, 224, 224}, {conv(64, 7, 2, 3), batch_norm(), relu(), max_pool2d(3, 2, 1)}};
  const int64_t blocks[] = {3, 4, 6, 3};
  for (int64_t stage = 0; stage < 4; ++stage) {
    const int64_t width = 64 << stage;
    for (int64_t block = 0; block < blocks[stage]; ++block) {
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      spec.layers.push_back(bottleneck(width, stride, block == 0));
    }
  }
  spec.layers.push_back(global_avg_pool2d());
  spec.layers.push_back(dense(classes));
  return spec;
}

std::vector<std::string> names() {
  return {"mlp", "lenet5", "resnet20", "resnet50", "transformer", "transformer_tiny"};
}

ModelSpec by_name(const std::string& name) {
  if (name == "mlp") {
    return mlp();
  }
  if (name == "lenet5") {
    return lenet5();
  }
  if (name == "resnet20") {
    return resnet20();
  }
  if (name == "resnet50") {
    return resnet50();
  }
  if (name == "transformer") {
    return transformer();
  }
  if (name == "transformer_tiny") {
    return transformer_tiny();
  }
  throw ConfigError("unknown zoo model '" + name +
                    "' (mlp, lenet5, resnet20, resnet50, transformer, transformer_tiny)");
}

}  // namespace tnt::compute::zoo
