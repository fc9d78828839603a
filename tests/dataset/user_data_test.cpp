// The user's own data: NumPy .npy arrays and folders of PNG/JPEG images, good and bad files.
#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

#include "expect_error.h"
#include "image_decode.h"
#include "test_files.h"
#include "tnt/dataset/loader.h"
#include "tnt/dataset/source.h"

namespace tnt::data {
namespace {

using test::TempDir;
using test::write_bytes;

// --- .npy ---------------------------------------------------------------------------------------

std::vector<std::uint8_t> npy_bytes(const std::string& descr, const std::string& shape, const void* data,
                                    std::size_t size, bool fortran = false, int version = 1) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<std::uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
  const std::size_t n = header.size();
  b.push_back(static_cast<std::uint8_t>(n & 0xff));
  b.push_back(static_cast<std::uint8_t>(n >> 8));
  if (version != 1) {
    b.push_back(0);
    b.push_back(0);
  }
  b.insert(b.end(), header.begin(), header.end());
  const auto* p = static_cast<const std::uint8_t*>(data);
  b.insert(b.end(), p, p + size);
  return b;
}

struct NpyFiles {
  std::filesystem::path features, labels;
};

// 6 samples of 2×3×2 float32: value (i, k) = i + k / 100; labels i mod 3 as int64.
NpyFiles write_npy_pair(const TempDir& dir, int version = 1) {
  std::vector<float> f(6 * 12);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t k = 0; k < 12; ++k) f[i * 12 + k] = static_cast<float>(i) + static_cast<float>(k) / 100.0f;
  std::vector<std::int64_t> l = {0, 1, 2, 0, 1, 2};
  NpyFiles files{dir / "x.npy", dir / "y.npy"};
  write_bytes(files.features, npy_bytes("<f4", "(6, 2, 3, 2)", f.data(), f.size() * 4, false, version));
  write_bytes(files.labels, npy_bytes("<i8", "(6,)", l.data(), l.size() * 8, false, version));
  return files;
}

TEST(Npy, ReadsFloat32FeaturesAndInt64Labels) {
  for (int version : {1, 2}) {
    TempDir dir;
    const auto files = write_npy_pair(dir, version);
    const auto src = make_npy_source(files.features, files.labels, 0, SampleShape{2, 3, 2});
    ASSERT_EQ(src->size(), 6u);
    EXPECT_EQ(src->shape(), (SampleShape{2, 3, 2}));
    EXPECT_EQ(src->num_classes(), 3);  // largest label + 1
    std::vector<float> out(12);
    for (std::size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(src->read(i, out), static_cast<std::int32_t>(i % 3));
      for (std::size_t k = 0; k < 12; ++k) {
        ASSERT_EQ(out[k], static_cast<float>(i) + static_cast<float>(k) / 100.0f);
      }
    }
  }
}

TEST(Npy, Uint8FeaturesAreScaledAndFlatRowsTakeTheModelShape) {
  TempDir dir;
  std::vector<std::uint8_t> f = {0, 51, 102, 153, 204, 255, 255, 0};
  std::vector<std::uint8_t> l = {4, 1};
  write_bytes(dir / "x.npy", npy_bytes("|u1", "(2, 4)", f.data(), f.size()));
  write_bytes(dir / "y.npy", npy_bytes("|u1", "(2,)", l.data(), l.size()));
  const auto src = make_npy_source(dir / "x.npy", dir / "y.npy", 10, SampleShape{1, 2, 2});
  EXPECT_EQ(src->shape(), (SampleShape{1, 2, 2}));
  EXPECT_EQ(src->num_classes(), 10);
  std::vector<float> out(4);
  EXPECT_EQ(src->read(0, out), 4);
  EXPECT_FLOAT_EQ(out[1], 0.2f);
  EXPECT_FLOAT_EQ(out[3], 0.6f);
  // Through make_source too, as tnt-train reaches it.
  SourceConfig c;
  c.kind = parse_source_kind("npy");
  c.path = (dir / "x.npy").string();
  c.labels_path = (dir / "y.npy").string();
  c.shape = {4, 1, 1};
  EXPECT_EQ(make_source(c)->size(), 2u);
}

TEST(Npy, TruncatedFilesNameTheFile) {
  TempDir dir;
  const auto files = write_npy_pair(dir);
  auto bytes = std::vector<std::uint8_t>(std::filesystem::file_size(files.features));
  {
    std::ifstream in(files.features, std::ios::binary);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  write_bytes(dir / "cut.npy", {bytes.begin(), bytes.end() - 5});
  expect_data_error([&] { make_npy_source(dir / "cut.npy", files.labels); }, {"cut.npy", "truncated"});
  write_bytes(dir / "head.npy", {bytes.begin(), bytes.begin() + 30});
  expect_data_error([&] { make_npy_source(dir / "head.npy", files.labels); }, {"head.npy", "truncated"});
  write_bytes(dir / "tiny.npy", {0x93, 'N'});
  expect_data_error([&] { make_npy_source(dir / "tiny.npy", files.labels); }, {"tiny.npy", "truncated"});
  auto longer = bytes;
  longer.push_back(0);
  write_bytes(dir / "long.npy", longer);
  expect_data_error([&] { make_npy_source(dir / "long.npy", files.labels); }, {"long.npy", "unexpected bytes"});
  expect_data_error([&] { make_npy_source(dir / "missing.npy", files.labels); }, {"missing.npy", "not found"});
}

TEST(Npy, MismatchedShapesAndCountsAreRefused) {
  TempDir dir;
  const auto files = write_npy_pair(dir);
  expect_data_error(
      [&] {
        make_npy_source(files.features, files.labels, 0, SampleShape{1, 28, 28});
      },
      {"x.npy", "(6, 2, 3, 2)", "1x28x28"});
  std::vector<std::int64_t> five = {0, 1, 2, 0, 1};
  write_bytes(dir / "five.npy", npy_bytes("<i8", "(5,)", five.data(), 40));
  expect_data_error([&] { make_npy_source(files.features, dir / "five.npy"); },
                    {"sample counts differ", "x.npy", "6", "five.npy", "5"});
  expect_data_error([&] { make_npy_source(files.features, files.labels, 2); }, {"y.npy", "label 2", "[0, 2)"});
  std::vector<float> fractional = {0.5f};
  write_bytes(dir / "frac.npy", npy_bytes("<f4", "(1,)", fractional.data(), 4));
  expect_data_error([&] { make_npy_source(files.features, dir / "frac.npy"); }, {"frac.npy", "0.5"});
  std::vector<float> matrix(12);
  write_bytes(dir / "onehot.npy", npy_bytes("<f4", "(6, 2)", matrix.data(), 48));
  expect_data_error([&] { make_npy_source(files.features, dir / "onehot.npy"); }, {"onehot.npy", "(N) or (N, 1)"});
  // Channels-last images get a hint.
  std::vector<std::uint8_t> nhwc(2 * 4 * 4 * 3);
  write_bytes(dir / "nhwc.npy", npy_bytes("|u1", "(2, 4, 4, 3)", nhwc.data(), nhwc.size()));
  expect_data_error(
      [&] {
        make_npy_source(dir / "nhwc.npy", files.labels, 0, SampleShape{3, 4, 4});
      },
      {"nhwc.npy", "channels-last"});
}

TEST(Npy, CorruptHeadersAreRefused) {
  TempDir dir;
  const auto files = write_npy_pair(dir);
  std::vector<float> f(4);
  const std::pair<std::vector<std::uint8_t>, std::string> cases[] = {
      {npy_bytes("<f4", "(2, 2)", f.data(), 16, true), "Fortran order"},
      {npy_bytes(">f4", "(2, 2)", f.data(), 16), "big-endian"},
      {npy_bytes("<f8", "(1, 2)", f.data(), 16), "unsupported dtype '<f8'"},
      {npy_bytes("<i4", "(2, 2)", f.data(), 16), "float32 or uint8"},
      {npy_bytes("<f4", "(2, x)", f.data(), 16), "expected a dimension"},
      {npy_bytes("<f4", "(99999999999999999999999, 2)", f.data(), 16), "too large"},
      {npy_bytes("<f4", "(4294967296, 4294967296, 4294967296)", f.data(), 16), "overflows"},
      {npy_bytes("<f4", "(2, 2, 1, 1, 1)", f.data(), 16), "expected (N, C, H, W)"},
      {{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}, "not an .npy file"},
  };
  for (const auto& [bytes, part] : cases) {
    write_bytes(dir / "bad.npy", bytes);
    expect_data_error([&] { make_npy_source(dir / "bad.npy", files.labels); }, {"bad.npy", part});
  }
  auto odd = npy_bytes("<f4", "(1, 1)", f.data(), 4);
  odd[11] = '[';  // the dict's brace
  write_bytes(dir / "bad.npy", odd);
  expect_data_error([&] { make_npy_source(dir / "bad.npy", files.labels); }, {"bad.npy", "bad .npy header"});
}

// --- images -------------------------------------------------------------------------------------

// Pixel (y, x) channel c of test image `seed`.
std::uint8_t pixel(int seed, std::size_t y, std::size_t x, std::size_t c) {
  return static_cast<std::uint8_t>((seed * 40 + y * 16 + x * 8 + c * 80) % 256);
}

std::vector<std::uint8_t> rgb_pixels(int seed, std::size_t w, std::size_t h) {
  std::vector<std::uint8_t> p(w * h * 3);
  for (std::size_t y = 0; y < h; ++y)
    for (std::size_t x = 0; x < w; ++x)
      for (std::size_t c = 0; c < 3; ++c) p[(y * w + x) * 3 + c] = pixel(seed, y, x, c);
  return p;
}

std::vector<std::uint8_t> png_bytes(const std::vector<std::uint8_t>& rgb, std::size_t w, std::size_t h) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(w);
  image.height = static_cast<png_uint_32>(h);
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&image, nullptr, &size, 0, rgb.data(), 0, nullptr));
  std::vector<std::uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&image, out.data(), &size, 0, rgb.data(), 0, nullptr)) << image.message;
  out.resize(size);
  return out;
}

std::vector<std::uint8_t> jpeg_bytes(const std::vector<std::uint8_t>& rgb, std::size_t w, std::size_t h) {
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitCompress(), tjDestroy);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(handle.get(), rgb.data(), static_cast<int>(w), 0, static_cast<int>(h), TJPF_RGB, &buffer, &size,
                        TJSAMP_444, 100, 0),
            0);
  std::vector<std::uint8_t> out(buffer, buffer + size);
  tjFree(buffer);
  return out;
}

// root/cat/{0,1}.png, root/dog/{0.jpg, 1.PNG}, root/dog/notes.txt, each 8×4 (W×H).
std::filesystem::path write_folder(const TempDir& dir) {
  const auto root = dir / "images";
  std::filesystem::create_directories(root / "cat");
  std::filesystem::create_directories(root / "dog");
  write_bytes(root / "cat" / "0.png", png_bytes(rgb_pixels(0, 8, 4), 8, 4));
  write_bytes(root / "cat" / "1.png", png_bytes(rgb_pixels(1, 8, 4), 8, 4));
  write_bytes(root / "dog" / "0.jpg", jpeg_bytes(rgb_pixels(2, 8, 4), 8, 4));
  write_bytes(root / "dog" / "1.PNG", png_bytes(rgb_pixels(3, 8, 4), 8, 4));
  write_bytes(root / "dog" / "notes.txt", {'h', 'i'});
  return root;
}

TEST(ImageFolder, DecodesPngAndJpegWithLabelsFromFolders) {
  TempDir dir;
  const auto root = write_folder(dir);
  const auto src = make_image_folder_source(root, {3, 4, 8});
  ASSERT_EQ(src->size(), 4u);
  EXPECT_EQ(src->num_classes(), 2);
  std::vector<float> out(3 * 4 * 8);
  const int seeds[] = {0, 1, 2, 3};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(src->read(i, out), i < 2 ? 0 : 1);
    // Same size: copied exactly (PNG) or within JPEG's loss at quality 100.
    const float tolerance = i == 2 ? 4.0f / 255 : 0.0f;
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t y = 0; y < 4; ++y)
        for (std::size_t x = 0; x < 8; ++x)
          ASSERT_NEAR(out[(c * 4 + y) * 8 + x], pixel(seeds[i], y, x, c) / 255.0f, tolerance) << i << c << y << x;
  }
  EXPECT_NE(src->describe().find("cat, dog"), std::string::npos) << src->describe();
}

TEST(ImageFolder, ResizesCropsAndConvertsToGray) {
  TempDir dir;
  const auto root = write_folder(dir);
  std::vector<float> out(2 * 2);
  // Halving by bilinear with aligned centres averages 2×2 blocks: x 0,1 → 4 on average, y 0,1.
  const auto half = make_image_folder_source(root, {3, 2, 4});
  std::vector<float> rgb(3 * 2 * 4);
  half->read(0, rgb);
  EXPECT_NEAR(rgb[0], (pixel(0, 0, 0, 0) + pixel(0, 1, 1, 0)) / 2 / 255.0f, 1e-6);
  // Crop to a square: the centred 4×4 of the 8×4 image, columns 2..5.
  const auto crop = make_image_folder_source(root, {3, 4, 4}, 0, ImageFit::crop);
  std::vector<float> sq(3 * 4 * 4);
  crop->read(1, sq);
  EXPECT_FLOAT_EQ(sq[0], pixel(1, 0, 2, 0) / 255.0f);
  EXPECT_FLOAT_EQ(sq[3], pixel(1, 0, 5, 0) / 255.0f);
  const auto gray = make_image_folder_source(root, {1, 4, 8});
  std::vector<float> g(4 * 8);
  gray->read(0, g);
  for (float v : g) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
  expect_data_error([&] { make_image_folder_source(root, {2, 4, 8}); }, {"1 or 3 channels", "2"});
  expect_data_error([&] { make_image_folder_source(root, {3, 4, 8}, 1); }, {"2 class folders", "1 classes"});
}

TEST(ImageFolder, TruncatedCorruptAndMislabelledFilesNameTheFile) {
  TempDir dir;
  const auto root = write_folder(dir);
  const auto png = png_bytes(rgb_pixels(5, 8, 4), 8, 4);
  const auto jpg = jpeg_bytes(rgb_pixels(5, 8, 4), 8, 4);
  std::vector<float> out(3 * 4 * 8);
  const std::pair<std::vector<std::uint8_t>, std::string> bad[] = {
      {{png.begin(), png.begin() + static_cast<std::ptrdiff_t>(png.size() / 2)}, "PNG"},
      {{jpg.begin(), jpg.begin() + static_cast<std::ptrdiff_t>(jpg.size() / 2)}, "JPEG"},
      {{png.begin(), png.begin() + 20}, "PNG"},
      {{jpg.begin(), jpg.begin() + 4}, "JPEG"},
  };
  for (const auto& [bytes, what] : bad) {
    write_bytes(root / "cat" / "0.png", bytes);
    const auto src = make_image_folder_source(root, {3, 4, 8});
    expect_data_error([&] { src->read(0, out); }, {"0.png", what});
  }
  // Corrupt data inside a PNG: its CRC no longer matches.
  auto flipped = png;
  flipped[flipped.size() / 2] ^= 0x55;
  write_bytes(root / "cat" / "0.png", flipped);
  expect_data_error([&] { make_image_folder_source(root, {3, 4, 8})->read(0, out); }, {"0.png", "PNG"});
  // A text file named .png is refused when the folder is opened.
  write_bytes(root / "cat" / "0.png", {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
  expect_data_error([&] { make_image_folder_source(root, {3, 4, 8}); }, {"0.png", "neither a PNG nor a JPEG"});
  expect_data_error([&] { make_image_folder_source(dir / "nowhere", {3, 4, 8}); }, {"nowhere", "not a directory"});
  std::filesystem::create_directories(dir / "flat");
  expect_data_error([&] { make_image_folder_source(dir / "flat", {3, 4, 8}); }, {"flat", "no class subfolders"});
}

TEST(ImageFolder, HugeHeadersAreRefusedBeforeAllocating) {
  auto png = png_bytes(rgb_pixels(0, 8, 4), 8, 4);
  // IHDR's width at bytes 16..19 (big endian): claim 100000 pixels.
  png[16] = 0, png[17] = 0x01, png[18] = 0x86, png[19] = 0xa0;
  expect_data_error([&] { detail::decode_image(png, "big.png", 3); }, {"big.png"});
}

TEST(ImageFolder, LoaderWithTwoWorkersGivesTheSameBatches) {
  TempDir dir;
  const auto root = write_folder(dir);
  const auto src = make_image_folder_source(root, {3, 4, 8});
  std::vector<std::vector<float>> results;
  for (std::size_t workers : {1, 2, 3}) {
    LoaderOptions o;
    o.plan.global_batch = 4;
    o.plan.seed = 3;
    o.end_epoch = 2;
    o.workers = workers;
    Loader loader(src, o);
    std::vector<float> all;
    while (auto b = loader.next()) all.insert(all.end(), b->data.begin(), b->data.end());
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  // A bad file in a batch read by several threads is the loader's error, naming the file.
  write_bytes(root / "dog" / "1.PNG", {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0});
  LoaderOptions o;
  o.plan.global_batch = 4;
  o.end_epoch = 1;
  o.workers = 2;
  Loader loader(make_image_folder_source(root, {3, 4, 8}), o);
  expect_data_error([&] { loader.next(); }, {"1.PNG"});
}

}  // namespace
}  // namespace tnt::data
