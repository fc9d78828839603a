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

// "mlp", "lenet5", "resnet20", "resnet50" with their defaults.
ModelSpec by_name(const std::string& name);
std::vector<std::string> names();

}  // namespace tnt::compute::zoo
