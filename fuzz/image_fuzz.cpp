// PNG and JPEG decoding (dataset/src/image_decode.cpp: libpng, libjpeg-turbo) and fitting to a
// model's input. Input: the channels (1 byte: 1 or 3), the target height and width (1 byte
// each, 1..64), crop or resize (1 byte), then the file.
#include <vector>

#include "fuzz_support.h"
#include "image_decode.h"
#include "tnt/dataset/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const std::size_t channels = input.ConsumeBool() ? 3 : 1;
  const auto height = input.ConsumeIntegralInRange<std::size_t>(1, 64);
  const auto width = input.ConsumeIntegralInRange<std::size_t>(1, 64);
  const auto fit = input.ConsumeBool() ? tnt::data::ImageFit::crop : tnt::data::ImageFit::resize;
  const auto bytes = input.ConsumeRemainingBytes<std::uint8_t>();
  try {
    const auto image = tnt::data::detail::decode_image(bytes, "fuzz.img", channels);
    if (image.channels != channels || image.width == 0 || image.height == 0 ||
        image.pixels.size() != image.width * image.height * channels) {
      tnt::fuzz::violated("decoded image of inconsistent size");
    }
    std::vector<float> out(channels * height * width);
    tnt::data::detail::fit_image(image, height, width, fit, out);
    for (float v : out)
      if (!(v >= 0.0f && v <= 1.0f)) tnt::fuzz::violated("pixel outside [0, 1]");
  } catch (const tnt::data::DataError&) {
  }
  return 0;
}
