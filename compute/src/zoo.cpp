#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

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

}  // namespace

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

std::vector<std::string> names() { return {"mlp", "lenet5", "resnet20", "resnet50"}; }

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
  throw ConfigError("unknown zoo model '" + name + "' (mlp, lenet5, resnet20, resnet50)");
}

}  // namespace tnt::compute::zoo
