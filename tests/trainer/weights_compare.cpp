// tnt-trainer-weights-compare A B RTOL: compares the parameters of two checkpoints tensor by
// tensor as max|a - b| / max|a| (the difference relative to the tensor's scale; an element-wise
// relative test is meaningless for weights that happen to be near zero). Prints the worst
// tensor; exit 0 if every tensor is within RTOL, 1 if not, 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "tnt/compute/checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s A.ckpt B.ckpt RTOL\n", argv[0]);
    return 2;
  }
  try {
    const auto a = tnt::compute::load_checkpoint(argv[1]);
    const auto b = tnt::compute::load_checkpoint(argv[2]);
    const double rtol = std::atof(argv[3]);
    if (a.parameters.size() != b.parameters.size()) {
      std::printf("different parameter counts: %zu vs %zu\n", a.parameters.size(), b.parameters.size());
      return 1;
    }
    double worst = 0.0;
    std::string worst_name;
    for (std::size_t i = 0; i < a.parameters.size(); ++i) {
      const auto& x = a.parameters[i];
      const auto& y = b.parameters[i];
      if (x.name != y.name || x.values.size() != y.values.size()) {
        std::printf("parameter %zu: %s vs %s\n", i, x.name.c_str(), y.name.c_str());
        return 1;
      }
      double diff = 0.0, scale = 0.0;
      for (std::size_t j = 0; j < x.values.size(); ++j) {
        diff = std::max(diff, std::abs(static_cast<double>(x.values[j]) - y.values[j]));
        scale = std::max(scale, std::abs(static_cast<double>(x.values[j])));
      }
      const double rel = scale > 0 ? diff / scale : diff;
      if (std::isnan(rel) || rel > worst) {
        worst = rel;
        worst_name = x.name;
      }
    }
    std::printf("largest relative weight difference %.3g (%s); tolerance %.3g\n", worst, worst_name.c_str(), rtol);
    return worst <= rtol ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
