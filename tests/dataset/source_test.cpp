#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>

#include "expect_error.h"
#include "test_files.h"
#include "tnt/dataset/source.h"

namespace tnt::data {
namespace {

using test::TempDir;

std::vector<float> read_all(const Source& s, std::size_t i, std::int32_t* label = nullptr) {
  std::vector<float> out(s.shape().elements());
  const auto l = s.read(i, out);
  if (label != nullptr) *label = l;
  return out;
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class IdxRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(IdxRoundTrip, ReadsPixelsScaledAndLabels) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 13, 5, 4, GetParam());
  const auto src = make_idx_source(files.images, files.labels);
  EXPECT_EQ(src->size(), 13u);
  EXPECT_EQ(src->shape(), (SampleShape{1, 5, 4}));
  EXPECT_EQ(src->num_classes(), 10);
  for (std::size_t i = 0; i < 13; ++i) {
    std::int32_t label = -1;
    const auto px = read_all(*src, i, &label);
    EXPECT_EQ(label, static_cast<int>(i % 10));
    for (std::size_t k = 0; k < 20; ++k) {
      ASSERT_FLOAT_EQ(px[k], static_cast<float>((i * 7 + k) % 256) / 255.0f) << i << "," << k;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(RawAndGzip, IdxRoundTrip, ::testing::Bool());

TEST(IdxSource, FourDimensionalImagesGiveChannels) {
  TempDir dir;
  std::vector<std::uint8_t> px(2 * 3 * 2 * 2);
  for (std::size_t k = 0; k < px.size(); ++k) px[k] = static_cast<std::uint8_t>(k);
  test::write_bytes(dir / "img", test::idx_bytes({2, 3, 2, 2}, px));
  test::write_bytes(dir / "lbl", test::idx_bytes({2}, {4, 9}));
  const auto src = make_idx_source(dir / "img", dir / "lbl");
  EXPECT_EQ(src->shape(), (SampleShape{3, 2, 2}));
  std::int32_t label = 0;
  const auto second = read_all(*src, 1, &label);
  EXPECT_EQ(label, 9);
  EXPECT_FLOAT_EQ(second[0], 12.0f / 255.0f);
}

TEST(IdxSource, MissingFileIsNamed) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  expect_data_error([&] { make_idx_source(dir / "nope-images", files.labels); },
                    {"file not found", (dir / "nope-images").string()});
}

TEST(IdxSource, TruncatedDataIsNamed) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  auto bytes = test::idx_bytes({3, 2, 2}, std::vector<std::uint8_t>(11));  // one byte short
  test::write_bytes(files.images, bytes);
  expect_data_error([&] { make_idx_source(files.images, files.labels); },
                    {files.images.string(), "truncated", "12 bytes", "holds 11"});
}

TEST(IdxSource, TruncatedHeaderIsNamed) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  test::write_bytes(files.labels, {0, 0, 8, 1, 0, 0});
  expect_data_error([&] { make_idx_source(files.images, files.labels); }, {files.labels.string(), "truncated"});
}

TEST(IdxSource, TruncatedGzipIsNamed) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 200, 28, 28, true);
  const auto full = std::filesystem::file_size(files.images);
  std::filesystem::resize_file(files.images, full / 2);
  expect_data_error([&] { make_idx_source(files.images, files.labels); }, {files.images.string(), "truncated"});
}

// Every cut of a valid file, raw or gzip, is an error that names the file, never a crash.
TEST(IdxSource, EveryTruncationIsAnError) {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const auto files = test::write_mnist_like(dir.path(), gzip ? "gz" : "raw", 4, 3, 2, false);
    const auto whole = test::idx_bytes({4, 3, 2}, std::vector<std::uint8_t>(24, 7));
    for (std::size_t length = 0; length < whole.size(); ++length) {
      const auto cut_path = dir / "cut";
      if (gzip) {
        // A complete gzip stream of a cut file, then the cut gzip stream of the whole file.
        test::write_bytes(cut_path, {whole.begin(), whole.begin() + static_cast<long>(length)}, true);
      } else {
        test::write_bytes(cut_path, {whole.begin(), whole.begin() + static_cast<long>(length)});
      }
      SCOPED_TRACE(testing::Message() << "gzip=" << gzip << " length=" << length);
      expect_data_error([&] { make_idx_source(cut_path, files.labels); }, {cut_path.string()});
    }
    if (gzip) {
      test::write_bytes(dir / "whole.gz", whole, true);
      const auto gz = std::filesystem::file_size(dir / "whole.gz");
      for (std::uintmax_t length = 1; length < gz; ++length) {
        std::filesystem::copy_file(dir / "whole.gz", dir / "cut.gz", std::filesystem::copy_options::overwrite_existing);
        std::filesystem::resize_file(dir / "cut.gz", length);
        SCOPED_TRACE(testing::Message() << "gzip stream cut at " << length);
        expect_data_error([&] { make_idx_source(dir / "cut.gz", files.labels); }, {(dir / "cut.gz").string()});
      }
    }
  }
}

TEST(IdxSource, TrailingBytesAreAnError) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  test::write_bytes(files.labels, test::idx_bytes({3}, {1, 2, 3, 4}));
  expect_data_error([&] { make_idx_source(files.images, files.labels); },
                    {files.labels.string(), "1 unexpected bytes"});
}

TEST(IdxSource, WrongMagicIsNamed) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  // Image and label files swapped: the image file gets a label header.
  expect_data_error([&] { make_idx_source(files.labels, files.images); },
                    {files.labels.string(), "wrong magic number 0x00000801", "image"});
  // A float IDX file (type 0x0d) is not what tnt reads either.
  test::write_bytes(dir / "float", test::idx_bytes({3, 2, 2}, std::vector<std::uint8_t>(48), 0x0d));
  expect_data_error([&] { make_idx_source(dir / "float", files.labels); }, {"wrong magic number 0x00000d03"});
  test::write_bytes(dir / "text", {'h', 'e', 'l', 'l', 'o', '\n'});
  expect_data_error([&] { make_idx_source(files.images, dir / "text"); },
                    {(dir / "text").string(), "wrong magic number"});
}

TEST(IdxSource, LabelOutOfRangeIsNamed) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  test::write_bytes(files.labels, test::idx_bytes({3}, {1, 10, 3}));
  expect_data_error([&] { make_idx_source(files.images, files.labels); },
                    {files.labels.string(), "label 10 of sample 1", "[0, 10)"});
  // The same file is fine with more classes.
  EXPECT_EQ(make_idx_source(files.images, files.labels, 11)->num_classes(), 11);
}

TEST(IdxSource, CountMismatchNamesBothFiles) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  test::write_bytes(files.labels, test::idx_bytes({4}, {1, 2, 3, 4}));
  expect_data_error([&] { make_idx_source(files.images, files.labels); },
                    {"counts differ", files.images.string(), "3 images", files.labels.string(), "4 labels"});
}

TEST(IdxSource, ReadChecksIndexAndBuffer) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "train", 3, 2, 2, false);
  const auto src = make_idx_source(files.images, files.labels);
  std::vector<float> out(4), small(3);
  expect_data_error([&] { src->read(3, out); }, {"sample index 3", "holds 3"});
  expect_data_error([&] { src->read(0, small); }, {"3 floats", "sample of 4"});
}

TEST(Cifar10Source, ReadsRecordsAcrossFiles) {
  TempDir dir;
  test::write_bytes(dir / "data_batch_1.bin", test::cifar_bytes(3, 0));
  test::write_bytes(dir / "data_batch_2.bin", test::cifar_bytes(2, 3));
  const auto src = make_cifar10_source({dir / "data_batch_1.bin", dir / "data_batch_2.bin"});
  EXPECT_EQ(src->size(), 5u);
  EXPECT_EQ(src->shape(), (SampleShape{3, 32, 32}));
  for (std::size_t r = 0; r < 5; ++r) {
    std::int32_t label = -1;
    const auto px = read_all(*src, r, &label);
    EXPECT_EQ(label, static_cast<int>(r % 10));
    EXPECT_FLOAT_EQ(px[0], static_cast<float>(r % 256) / 255.0f);
    EXPECT_FLOAT_EQ(px[3071], static_cast<float>((r + 3071) % 256) / 255.0f);
  }
}

TEST(Cifar10Source, FactoryFindsDirectoryAndSplit) {
  TempDir dir;
  for (int i = 1; i <= 5; ++i) {
    test::write_bytes(dir / ("data_batch_" + std::to_string(i) + ".bin"), test::cifar_bytes(2));
  }
  test::write_bytes(dir / "test_batch.bin", test::cifar_bytes(3));
  SourceConfig config;
  config.kind = parse_source_kind("cifar10");
  config.path = dir.path().string();
  EXPECT_EQ(make_source(config)->size(), 10u);
  config.split = parse_split("test");
  EXPECT_EQ(make_source(config)->size(), 3u);
  config.path = (dir / "test_batch.bin").string();
  EXPECT_EQ(make_source(config)->size(), 3u);
}

TEST(Cifar10Source, TruncatedAndBadLabelAreNamed) {
  TempDir dir;
  auto bytes = test::cifar_bytes(2);
  bytes.pop_back();
  test::write_bytes(dir / "cut.bin", bytes);
  expect_data_error([&] { make_cifar10_source({dir / "cut.bin"}); },
                    {(dir / "cut.bin").string(), "truncated", "3072 bytes"});
  bytes = test::cifar_bytes(3);
  bytes[2 * 3073] = 10;
  test::write_bytes(dir / "label.bin", bytes);
  expect_data_error([&] { make_cifar10_source({dir / "label.bin"}); },
                    {(dir / "label.bin").string(), "label 10 of record 2"});
  expect_data_error([&] { make_cifar10_source({dir / "missing.bin"}); },
                    {"file not found", (dir / "missing.bin").string()});
}

TEST(SyntheticSource, DeterministicFromSeedAndIndex) {
  const auto a = make_synthetic_source({3, 9, 7}, 5, 50, 42);
  const auto b = make_synthetic_source({3, 9, 7}, 5, 50, 42);
  const auto c = make_synthetic_source({3, 9, 7}, 5, 50, 43);
  std::set<int> labels;
  bool differs = false;
  for (std::size_t i = 0; i < 50; ++i) {
    std::int32_t la = 0, lb = 0, lc = 0;
    const auto xa = read_all(*a, i, &la);
    EXPECT_EQ(xa, read_all(*b, i, &lb));
    EXPECT_EQ(la, lb);
    differs = differs || xa != read_all(*c, i, &lc);
    ASSERT_GE(la, 0);
    ASSERT_LT(la, 5);
    labels.insert(la);
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(labels.size(), 5u);
  // Reading out of order gives the same sample (random access, no hidden stream state).
  EXPECT_EQ(read_all(*a, 17), read_all(*b, 17));
  expect_data_error([] { make_synthetic_source({3, 0, 7}, 5, 50, 1); }, {"empty"});
  expect_data_error([] { make_synthetic_source({3, 4, 7}, 0, 50, 1); }, {"classes"});
  expect_data_error([] { make_synthetic_source({3, 4, 7}, 2, 0, 1); }, {"samples"});
}

TEST(MemorySource, ChecksCountsAndLabels) {
  SourceConfig config;
  config.kind = SourceKind::memory;
  config.shape = {1, 2, 2};
  config.num_classes = 3;
  config.memory_images = {1, 2, 3, 4, 5, 6, 7, 8};
  config.memory_labels = {2, 0};
  const auto src = make_source(config);
  std::int32_t label = -1;
  EXPECT_EQ(read_all(*src, 1, &label), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(label, 0);
  config.memory_labels = {2, 0, 1};
  expect_data_error([&] { make_source(config); }, {"counts differ"});
  config.memory_labels = {2, 3};
  expect_data_error([&] { make_source(config); }, {"label 3 of sample 1"});
}

TEST(SubsetSource, RenumbersAndChecksRange) {
  const auto base = make_synthetic_source({1, 3, 3}, 4, 10, 7);
  const auto sub = make_subset(base, 4, 3);
  EXPECT_EQ(sub->size(), 3u);
  EXPECT_EQ(read_all(*sub, 0), read_all(*base, 4));
  EXPECT_EQ(read_all(*sub, 2), read_all(*base, 6));
  expect_data_error([&] { make_subset(base, 8, 3); }, {"[8, 11)", "10 samples"});
}

TEST(Factory, KindNamesRoundTrip) {
  for (auto kind : {SourceKind::fashion_mnist, SourceKind::mnist, SourceKind::idx, SourceKind::cifar10,
                    SourceKind::synthetic, SourceKind::memory}) {
    EXPECT_EQ(parse_source_kind(to_string(kind)), kind);
  }
  expect_data_error([] { parse_source_kind("imagenet"); }, {"'imagenet'"});
  expect_data_error([] { parse_split("validation"); }, {"'validation'"});
}

TEST(Factory, MnistFoundThroughDataDirAndLimitedBySize) {
  TempDir dir;
  std::filesystem::create_directories(dir / "mnist");
  test::write_mnist_like(dir / "mnist", "train", 20, 4, 4, true);
  test::write_mnist_like(dir / "mnist", "t10k", 6, 4, 4, false);
  ScopedEnv env("TNT_DATA_DIR", dir.path().string());
  SourceConfig config;
  config.kind = SourceKind::mnist;
  EXPECT_EQ(make_source(config)->size(), 20u);
  config.split = Split::test;
  EXPECT_EQ(make_source(config)->size(), 6u);
  config.size = 4;
  EXPECT_EQ(make_source(config)->size(), 4u);
  config.size = 7;
  expect_data_error([&] { make_source(config); }, {"6 samples"});
}

TEST(Factory, IdxKindNeedsBothFiles) {
  TempDir dir;
  const auto files = test::write_mnist_like(dir.path(), "x", 5, 3, 3, false, 3);
  SourceConfig config;
  config.kind = SourceKind::idx;
  config.path = files.images.string();
  expect_data_error([&] { make_source(config); }, {"labels_path"});
  config.labels_path = files.labels.string();
  config.num_classes = 3;
  EXPECT_EQ(make_source(config)->num_classes(), 3);
}

TEST(Factory, NotFoundListsPlacesTried) {
  TempDir dir;
  ScopedEnv env("TNT_DATA_DIR", dir.path().string());
  SourceConfig config;
  config.kind = SourceKind::mnist;
  expect_data_error([&] { make_source(config); },
                    {"mnist not found", "train-images-idx3-ubyte", (dir / "mnist").string(),
                     "/usr/share/datasets/mnist", "TNT_DATA_DIR"});
  config.path = (dir / "elsewhere").string();
  expect_data_error([&] { make_source(config); }, {"mnist not found", config.path});
}

// The real data set, when the Debian package dataset-fashion-mnist is installed.
TEST(FashionMnist, InstalledDataSetLoads) {
  std::shared_ptr<const Source> train, test_split;
  try {
    SourceConfig config;
    config.kind = SourceKind::fashion_mnist;
    config.split = Split::test;
    test_split = make_source(config);
    config.split = Split::train;
    train = make_source(config);
  } catch (const DataError& e) {
    GTEST_SKIP() << "Fashion-MNIST not installed: " << e.what();
  }
  EXPECT_EQ(train->size(), 60000u);
  EXPECT_EQ(test_split->size(), 10000u);
  EXPECT_EQ(train->shape(), (SampleShape{1, 28, 28}));
  // The test split is balanced: 1000 samples of each class.
  std::vector<int> counts(10);
  std::vector<float> px(784);
  double sum = 0;
  for (std::size_t i = 0; i < test_split->size(); ++i) {
    ++counts.at(static_cast<std::size_t>(test_split->read(i, px)));
    for (float v : px) sum += v;
  }
  EXPECT_EQ(counts, std::vector<int>(10, 1000));
  // Fashion-MNIST's pixel mean is about 0.286.
  EXPECT_NEAR(sum / (10000.0 * 784.0), 0.286, 0.01);
}

}  // namespace
}  // namespace tnt::data
