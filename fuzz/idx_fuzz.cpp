// IDX files (dataset/src/idx_source.cpp, the MNIST format): an image file and a label file,
// checked against each other, then every sample read. Input: the class count, the image
// file's length (2 bytes), the image file, and the label file.
#include <cmath>
#include <vector>

#include "fuzz_support.h"
#include "sources.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const int classes = input.ConsumeIntegralInRange(0, 257);
  auto images = input.ConsumeBytes<std::uint8_t>(input.ConsumeIntegral<std::uint16_t>());
  auto labels = input.ConsumeRemainingBytes<std::uint8_t>();
  try {
    auto source = tnt::data::detail::idx_source_from_bytes(std::move(images), "images.idx", std::move(labels),
                                                           "labels.idx", classes);
    std::vector<float> sample(source->shape().elements());
    for (std::size_t i = 0; i < source->size(); ++i) {
      const auto label = source->read(i, sample);
      if (label < 0 || label >= source->num_classes()) tnt::fuzz::violated("label out of range");
      for (float v : sample)
        if (!(v >= 0.0f && v <= 1.0f)) tnt::fuzz::violated("pixel outside [0, 1]");
    }
  } catch (const tnt::data::DataError&) {
  }
  return 0;
}
