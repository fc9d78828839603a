// NumPy .npy files (dataset/src/npy_source.cpp, Note [NPY format]): a features file and a labels
// file, checked against each other and optionally against a model's shape, then every sample
// read. Input: the class count (1 byte), the expected shape's choice (1 byte: none, or the
// features' own), the features file's length (2 bytes), the features file, the labels file.
#include <cmath>
#include <optional>
#include <vector>

#include "fuzz_support.h"
#include "sources.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const int classes = input.ConsumeIntegralInRange(0, 20);
  const int shape_choice = input.ConsumeIntegralInRange(0, 2);
  auto features = input.ConsumeBytes<std::uint8_t>(input.ConsumeIntegral<std::uint16_t>());
  auto labels = input.ConsumeRemainingBytes<std::uint8_t>();
  std::optional<tnt::data::SampleShape> expected;
  if (shape_choice == 1) expected = tnt::data::SampleShape{1, 2, 2};
  if (shape_choice == 2) expected = tnt::data::SampleShape{3, 1, 1};
  try {
    auto source = tnt::data::detail::npy_source_from_bytes(std::move(features), "x.npy", std::move(labels), "y.npy",
                                                           classes, expected);
    if (expected && source->shape() != *expected) tnt::fuzz::violated("shape differs from the expected one");
    if (classes > 0 && source->num_classes() != classes) tnt::fuzz::violated("class count changed");
    std::vector<float> sample(source->shape().elements());
    for (std::size_t i = 0; i < source->size(); ++i) {
      const auto label = source->read(i, sample);
      if (label < 0 || label >= source->num_classes()) tnt::fuzz::violated("label out of range");
    }
  } catch (const tnt::data::DataError&) {
  }
  return 0;
}
