// CIFAR-10 binary batches (dataset/src/cifar10_source.cpp): one to three files' contents, then
// every sample read. Input: the number of files, each file's length (2 bytes) and bytes.
#include <vector>

#include "fuzz_support.h"
#include "sources.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const int files = input.ConsumeIntegralInRange(0, 3);
  std::vector<std::vector<std::uint8_t>> batches;
  std::vector<std::string> paths;
  for (int i = 0; i < files; ++i) {
    batches.push_back(i + 1 == files ? input.ConsumeRemainingBytes<std::uint8_t>()
                                     : input.ConsumeBytes<std::uint8_t>(input.ConsumeIntegral<std::uint16_t>()));
    paths.push_back("data_batch_" + std::to_string(i + 1) + ".bin");
  }
  try {
    auto source = tnt::data::detail::cifar10_source_from_bytes(std::move(batches), paths);
    std::vector<float> sample(source->shape().elements());
    for (std::size_t i = 0; i < source->size(); ++i) {
      const auto label = source->read(i, sample);
      if (label < 0 || label >= source->num_classes()) tnt::fuzz::violated("label out of range");
    }
  } catch (const tnt::data::DataError&) {
  }
  return 0;
}
