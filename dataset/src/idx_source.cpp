// IDX files (the MNIST format): a big-endian header {0, 0, type, ndims, dims[ndims]} and then the
// data. Only unsigned-byte data (type 0x08) is used by the data sets tnt reads.
#include <fmt/format.h>

#include <limits>

#include "file_io.h"
#include "sources.h"
#include "tnt/dataset/error.h"

namespace tnt::data::detail {
namespace {

struct IdxFile {
  std::vector<std::uint8_t> bytes;
  std::vector<std::size_t> dims;
  std::size_t data_offset = 0;
};

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

// `min_dims`..`max_dims` dimensions expected; `what` names the role ("image", "label"), `name`
// the file.
IdxFile parse_idx(std::vector<std::uint8_t> bytes, const std::string& name, std::size_t min_dims, std::size_t max_dims,
                  const char* what) {
  IdxFile idx;
  idx.bytes = std::move(bytes);
  const auto& b = idx.bytes;
  if (b.size() < 4) {
    throw DataError(fmt::format("{}: truncated: {} bytes, too short for an IDX header", name, b.size()));
  }
  const std::uint32_t magic = big_endian_u32(b.data());
  const std::size_t ndims = b[3];
  if (b[0] != 0 || b[1] != 0 || b[2] != 0x08 || ndims < min_dims || ndims > max_dims) {
    throw DataError(
        fmt::format("{}: wrong magic number 0x{:08x} for an IDX {} file (expected 0x{:08x}{}: unsigned bytes, "
                    "{} dimensions)",
                    name, magic, what, 0x0800u + min_dims,
                    min_dims == max_dims ? std::string() : fmt::format(" or 0x{:08x}", 0x0800u + max_dims),
                    min_dims == max_dims ? fmt::format("{}", min_dims) : fmt::format("{} or {}", min_dims, max_dims)));
  }
  idx.data_offset = 4 + 4 * ndims;
  if (b.size() < idx.data_offset) {
    throw DataError(fmt::format("{}: truncated: {} bytes, the header of {} dimensions needs {}", name, b.size(), ndims,
                                idx.data_offset));
  }
  std::size_t expected = 1;
  for (std::size_t d = 0; d < ndims; ++d) {
    const std::size_t dim = big_endian_u32(b.data() + 4 + 4 * d);
    idx.dims.push_back(dim);
    // Dimensions come from the file: never multiply past what the file could hold.
    if (dim != 0 && expected > std::numeric_limits<std::size_t>::max() / dim) {
      throw DataError(fmt::format("{}: header dimensions overflow: not a valid IDX file", name));
    }
    expected *= dim;
  }
  const std::size_t present = b.size() - idx.data_offset;
  if (present < expected) {
    throw DataError(fmt::format("{}: truncated: the header promises {} bytes of data ({}), the file holds {}", name,
                                expected, fmt::join(idx.dims, "x"), present));
  }
  if (present > expected) {
    throw DataError(fmt::format("{}: {} unexpected bytes after the {} bytes of data ({})", name, present - expected,
                                expected, fmt::join(idx.dims, "x")));
  }
  return idx;
}

class IdxSource final : public Source {
 public:
  IdxSource(IdxFile image_file, std::string images_path, IdxFile label_file, std::string labels_path, int num_classes)
      : images_path_(std::move(images_path)),
        labels_path_(std::move(labels_path)),
        num_classes_(num_classes),
        images_(std::move(image_file)),
        labels_(std::move(label_file)) {
    const auto& d = images_.dims;
    shape_ = d.size() == 3 ? SampleShape{1, d[1], d[2]} : SampleShape{d[1], d[2], d[3]};
    if (shape_.elements() == 0 && d[0] != 0) {
      throw DataError(fmt::format("{}: images of zero size ({})", images_path_, fmt::join(d, "x")));
    }
    if (d[0] != labels_.dims[0]) {
      throw DataError(
          fmt::format("image and label counts differ: {} holds {} images, {} holds {} "
                      "labels",
                      images_path_, d[0], labels_path_, labels_.dims[0]));
    }
    size_ = d[0];
    const std::uint8_t* labels = labels_.bytes.data() + labels_.data_offset;
    for (std::size_t i = 0; i < size_; ++i) {
      if (labels[i] >= num_classes_) {
        throw DataError(fmt::format("{}: label {} of sample {} is out of range [0, {})", labels_path_, int{labels[i]},
                                    i, num_classes_));
      }
    }
  }

  std::size_t size() const override { return size_; }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  std::int32_t read(std::size_t index, std::span<float> out) const override {
    check_read(*this, index, out);
    const std::size_t n = shape_.elements();
    const std::uint8_t* pixels = images_.bytes.data() + images_.data_offset + index * n;
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(pixels[i]) * (1.0f / 255.0f);
    return labels_.bytes[labels_.data_offset + index];
  }

  std::string describe() const override {
    return fmt::format("idx {} + {}: {} samples of {}x{}x{}, {} classes", images_path_, labels_path_, size_,
                       shape_.channels, shape_.height, shape_.width, num_classes_);
  }

 private:
  std::string images_path_, labels_path_;
  int num_classes_;
  IdxFile images_, labels_;
  SampleShape shape_;
  std::size_t size_ = 0;
};

void check_classes(int num_classes, const std::string& images_path) {
  if (num_classes <= 0 || num_classes > 256) {
    throw DataError(fmt::format("IDX source {}: number of classes {} is not in [1, 256]", images_path, num_classes));
  }
}

}  // namespace

std::shared_ptr<const Source> idx_source_from_bytes(std::vector<std::uint8_t> images, const std::string& images_path,
                                                    std::vector<std::uint8_t> labels, const std::string& labels_path,
                                                    int num_classes) {
  check_classes(num_classes, images_path);
  IdxFile image_file = parse_idx(std::move(images), images_path, 3, 4, "image");
  IdxFile label_file = parse_idx(std::move(labels), labels_path, 1, 1, "label");
  return std::make_shared<IdxSource>(std::move(image_file), images_path, std::move(label_file), labels_path,
                                     num_classes);
}

}  // namespace tnt::data::detail

namespace tnt::data {

std::shared_ptr<const Source> make_idx_source(const std::filesystem::path& images, const std::filesystem::path& labels,
                                              int num_classes) {
  detail::check_classes(num_classes, images.string());
  auto image_bytes = detail::read_file_bytes(images);
  return detail::idx_source_from_bytes(std::move(image_bytes), images.string(), detail::read_file_bytes(labels),
                                       labels.string(), num_classes);
}

}  // namespace tnt::data
