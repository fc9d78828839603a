#pragma once
// Decoding of PNG (libpng) and JPEG (libjpeg-turbo) files and fitting them to a model's input.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tnt/dataset/source.h"

namespace tnt::data::detail {

enum class ImageFormat { png, jpeg, unknown };

// From the first bytes (signatures), never from the file name.
ImageFormat sniff_image(std::span<const std::uint8_t> bytes);

// An 8-bit image, interleaved (HWC), with 1 (gray) or 3 (RGB) channels.
struct DecodedImage {
  std::size_t width = 0, height = 0, channels = 0;
  std::vector<std::uint8_t> pixels;
};

// Largest width or height accepted: a header may claim anything, and memory is allocated from it.
inline constexpr std::size_t kMaxImageSide = 16384;

// Decodes PNG or JPEG bytes into `channels` (1 or 3) channels: colour is converted to gray
// (luminance) or gray replicated to RGB, alpha is dropped (PNG: composited onto black).
// `name` stands for the file in messages. Throws DataError for anything that is not a whole,
// valid image of at most kMaxImageSide pixels a side.
DecodedImage decode_image(std::span<const std::uint8_t> bytes, const std::string& name, std::size_t channels);

// Bilinear resampling (pixel centres aligned) of `image`, or of its centred crop, into CHW
// floats scaled to [0, 1]: out.size() == image.channels × height × width.
void fit_image(const DecodedImage& image, std::size_t height, std::size_t width, ImageFit fit, std::span<float> out);

}  // namespace tnt::data::detail
