// PNG through libpng's simplified API, JPEG through the TurboJPEG API of libjpeg-turbo: both
// report errors as return values, so no longjmp crosses C++ frames here.
#include "image_decode.h"

#include <fmt/format.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "tnt/dataset/error.h"

namespace tnt::data::detail {
namespace {

// At most 64 Mi pixels: a header must not make a small file allocate gigabytes.
constexpr std::size_t kMaxImagePixels = std::size_t{1} << 26;

void check_size(std::size_t width, std::size_t height, const std::string& name) {
  if (width == 0 || height == 0) throw DataError(fmt::format("{}: image of size {}x{}", name, width, height));
  if (width > kMaxImageSide || height > kMaxImageSide || width * height > kMaxImagePixels) {
    throw DataError(fmt::format("{}: image of {}x{} pixels is larger than the {}x{} (and {} Mi pixels) accepted", name,
                                width, height, kMaxImageSide, kMaxImageSide, kMaxImagePixels >> 20));
  }
}

DecodedImage decode_png(std::span<const std::uint8_t> bytes, const std::string& name, std::size_t channels) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  // png_image_free must run on every path once begin_read succeeded.
  struct Free {
    png_image* p;
    ~Free() { png_image_free(p); }
  } release{&image};
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    throw DataError(fmt::format("{}: not a valid PNG file ({})", name, image.message));
  }
  check_size(image.width, image.height, name);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  DecodedImage out{image.width, image.height, channels, {}};
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr)) {
    throw DataError(fmt::format("{}: corrupt or truncated PNG data ({})", name, image.message));
  }
  return out;
}

DecodedImage decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& name, std::size_t channels) {
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  if (!handle) throw DataError(fmt::format("{}: cannot start a JPEG decoder ({})", name, tjGetErrorStr2(nullptr)));
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height,
                          &subsampling, &colorspace) != 0) {
    throw DataError(fmt::format("{}: not a valid JPEG file ({})", name, tjGetErrorStr2(handle.get())));
  }
  if (width <= 0 || height <= 0) throw DataError(fmt::format("{}: JPEG of size {}x{}", name, width, height));
  check_size(static_cast<std::size_t>(width), static_cast<std::size_t>(height), name);
  DecodedImage out{static_cast<std::size_t>(width), static_cast<std::size_t>(height), channels, {}};
  out.pixels.resize(out.width * out.height * channels);
  // STOPONWARNING: a truncated or damaged stream is an error, not an image padded with grey.
  if (tjDecompress2(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), out.pixels.data(), width, 0,
                    height, channels == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
    throw DataError(fmt::format("{}: corrupt or truncated JPEG data ({})", name, tjGetErrorStr2(handle.get())));
  }
  return out;
}

}  // namespace

ImageFormat sniff_image(std::span<const std::uint8_t> bytes) {
  static constexpr std::uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= sizeof kPng && std::memcmp(bytes.data(), kPng, sizeof kPng) == 0) return ImageFormat::png;
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return ImageFormat::jpeg;
  return ImageFormat::unknown;
}

DecodedImage decode_image(std::span<const std::uint8_t> bytes, const std::string& name, std::size_t channels) {
  if (channels != 1 && channels != 3) {
    throw DataError(fmt::format("{}: images decode to 1 or 3 channels, the model's input has {}", name, channels));
  }
  switch (sniff_image(bytes)) {
    case ImageFormat::png: return decode_png(bytes, name, channels);
    case ImageFormat::jpeg: return decode_jpeg(bytes, name, channels);
    case ImageFormat::unknown: break;
  }
  throw DataError(
      fmt::format("{}: neither a PNG nor a JPEG file ({} bytes; the signature does not match)", name, bytes.size()));
}

void fit_image(const DecodedImage& image, std::size_t height, std::size_t width, ImageFit fit, std::span<float> out) {
  const std::size_t c = image.channels;
  // The source region: the whole image, or its centred crop of the target's aspect ratio.
  double region_w = static_cast<double>(image.width), region_h = static_cast<double>(image.height);
  if (fit == ImageFit::crop) {
    const double target = static_cast<double>(width) / static_cast<double>(height);
    if (region_w / region_h > target) {
      region_w = std::max(1.0, std::round(region_h * target));
    } else {
      region_h = std::max(1.0, std::round(region_w / target));
    }
  }
  const double x0 = std::floor((static_cast<double>(image.width) - region_w) / 2);
  const double y0 = std::floor((static_cast<double>(image.height) - region_h) / 2);
  const double sx = region_w / static_cast<double>(width), sy = region_h / static_cast<double>(height);
  const auto clamp = [](double v, std::size_t n) { return std::clamp(v, 0.0, static_cast<double>(n - 1)); };
  for (std::size_t y = 0; y < height; ++y) {
    const double fy = clamp(y0 + (static_cast<double>(y) + 0.5) * sy - 0.5, image.height);
    const auto iy = static_cast<std::size_t>(fy);
    const std::size_t iy1 = std::min(iy + 1, image.height - 1);
    const double wy = fy - static_cast<double>(iy);
    for (std::size_t x = 0; x < width; ++x) {
      const double fx = clamp(x0 + (static_cast<double>(x) + 0.5) * sx - 0.5, image.width);
      const auto ix = static_cast<std::size_t>(fx);
      const std::size_t ix1 = std::min(ix + 1, image.width - 1);
      const double wx = fx - static_cast<double>(ix);
      const std::uint8_t* p00 = &image.pixels[(iy * image.width + ix) * c];
      const std::uint8_t* p01 = &image.pixels[(iy * image.width + ix1) * c];
      const std::uint8_t* p10 = &image.pixels[(iy1 * image.width + ix) * c];
      const std::uint8_t* p11 = &image.pixels[(iy1 * image.width + ix1) * c];
      for (std::size_t ch = 0; ch < c; ++ch) {
        const double top = p00[ch] + wx * (p01[ch] - p00[ch]);
        const double bottom = p10[ch] + wx * (p11[ch] - p10[ch]);
        out[(ch * height + y) * width + x] = static_cast<float>((top + wy * (bottom - top)) / 255.0);
      }
    }
  }
}

}  // namespace tnt::data::detail
