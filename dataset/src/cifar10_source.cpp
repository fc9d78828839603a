// CIFAR-10 binary batches: records of 1 label byte + 3072 pixel bytes (3 channels of 32×32, CHW).
#include <fmt/format.h>

#include "file_io.h"
#include "sources.h"

namespace tnt::data::detail {
namespace {

constexpr std::size_t kSide = 32;
constexpr std::size_t kPixels = 3 * kSide * kSide;
constexpr std::size_t kRecord = 1 + kPixels;
constexpr int kClasses = 10;

class Cifar10Source final : public Source {
 public:
  Cifar10Source(std::vector<std::vector<std::uint8_t>> batches, const std::vector<std::string>& files) : files_(files) {
    if (files.empty() || batches.size() != files.size()) throw DataError("CIFAR-10 source: no batch files given");
    for (std::size_t i = 0; i < files.size(); ++i) {
      const std::string& path = files[i];
      std::vector<std::uint8_t> bytes = std::move(batches[i]);
      if (bytes.empty()) throw DataError(path + ": empty CIFAR-10 batch file");
      if (bytes.size() % kRecord != 0) {
        throw DataError(
            fmt::format("{}: truncated or not a CIFAR-10 batch: {} bytes is not a multiple of the {}-byte "
                        "record (the last record has {} bytes)",
                        path, bytes.size(), kRecord, bytes.size() % kRecord));
      }
      const std::size_t records = bytes.size() / kRecord;
      for (std::size_t r = 0; r < records; ++r) {
        if (bytes[r * kRecord] >= kClasses) {
          throw DataError(fmt::format("{}: label {} of record {} is out of range [0, {})", path,
                                      int{bytes[r * kRecord]}, r, kClasses));
        }
      }
      data_.insert(data_.end(), bytes.begin(), bytes.end());
    }
    size_ = data_.size() / kRecord;
  }

  std::size_t size() const override { return size_; }
  SampleShape shape() const override { return {3, kSide, kSide}; }
  int num_classes() const override { return kClasses; }

  std::int32_t read(std::size_t index, std::span<float> out) const override {
    check_read(*this, index, out);
    const std::uint8_t* record = data_.data() + index * kRecord;
    for (std::size_t i = 0; i < kPixels; ++i) {
      out[i] = static_cast<float>(record[1 + i]) * (1.0f / 255.0f);
    }
    return record[0];
  }

  std::string describe() const override {
    return fmt::format("cifar10 {} file(s) from {}: {} samples of 3x32x32, 10 classes", files_.size(), files_.front(),
                       size_);
  }

 private:
  std::vector<std::string> files_;
  std::vector<std::uint8_t> data_;
  std::size_t size_ = 0;
};

}  // namespace

std::shared_ptr<const Source> cifar10_source_from_bytes(std::vector<std::vector<std::uint8_t>> batches,
                                                        const std::vector<std::string>& paths) {
  return std::make_shared<Cifar10Source>(std::move(batches), paths);
}

}  // namespace tnt::data::detail

namespace tnt::data {

std::shared_ptr<const Source> make_cifar10_source(const std::vector<std::filesystem::path>& files) {
  std::vector<std::vector<std::uint8_t>> batches;
  std::vector<std::string> paths;
  for (const auto& path : files) {
    batches.push_back(detail::read_file_bytes(path));
    paths.push_back(path.string());
  }
  return detail::cifar10_source_from_bytes(std::move(batches), paths);
}

}  // namespace tnt::data
