// A folder of images, one subfolder per class (Keras's image_dataset_from_directory layout):
// the files are listed and their signatures checked once; every read() decodes one file.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <system_error>

#include "image_decode.h"
#include "sources.h"
#include "tnt/dataset/error.h"

namespace tnt::data {
namespace {

bool is_image_name(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

std::vector<std::uint8_t> read_whole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw DataError(fmt::format("cannot open {}", path.string()));
  const std::streamoff size = in.tellg();
  if (size < 0) throw DataError(fmt::format("cannot read {}", path.string()));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw DataError(fmt::format("cannot read {}", path.string()));
  return bytes;
}

void check_signature(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint8_t head[8] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const auto got = static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount()));
  if (detail::sniff_image({head, got}) == detail::ImageFormat::unknown) {
    throw DataError(fmt::format("{}: neither a PNG nor a JPEG file ({} bytes read; the signature does not match)",
                                path.string(), got));
  }
}

std::vector<std::filesystem::path> sorted_entries(const std::filesystem::path& dir, bool directories) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const bool is_dir = it->is_directory(ec);
    if (directories ? is_dir : (!is_dir && is_image_name(it->path()))) out.push_back(it->path());
  }
  if (ec) throw DataError(fmt::format("cannot list {}: {}", dir.string(), ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

class ImageFolderSource final : public Source {
 public:
  ImageFolderSource(std::filesystem::path root, SampleShape shape, int num_classes, ImageFit fit)
      : root_(std::move(root)), shape_(shape), fit_(fit) {
    if (shape_.channels != 1 && shape_.channels != 3) {
      throw DataError(fmt::format("image folder {}: images decode to 1 or 3 channels, the model's input has {}",
                                  root_.string(), shape_.channels));
    }
    if (shape_.height == 0 || shape_.width == 0) {
      throw DataError(fmt::format("image folder {}: target size {}x{}", root_.string(), shape_.height, shape_.width));
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(root_, ec)) {
      throw DataError(fmt::format("image folder {} is not a directory", root_.string()));
    }
    const auto classes = sorted_entries(root_, true);
    if (classes.empty()) {
      throw DataError(
          fmt::format("image folder {} has no class subfolders (expected ROOT/CLASS/IMAGE.png)", root_.string()));
    }
    std::vector<std::string> empty;
    for (std::size_t c = 0; c < classes.size(); ++c) {
      class_names_.push_back(classes[c].filename().string());
      auto images = sorted_entries(classes[c], false);
      if (images.empty()) empty.push_back(class_names_.back());
      for (auto& file : images) {
        check_signature(file);
        files_.push_back(std::move(file));
        labels_.push_back(static_cast<std::int32_t>(c));
      }
    }
    if (files_.empty()) {
      throw DataError(fmt::format("image folder {}: its {} class folders hold no .png, .jpg or .jpeg files",
                                  root_.string(), classes.size()));
    }
    // An empty class folder keeps its class, so that a test folder with the same classes gets
    // the same labels; but nothing teaches that class, which is most often a copy gone wrong.
    if (!empty.empty()) {
      spdlog::warn(
          "image folder {}: {} of its {} class folders hold no .png, .jpg or .jpeg files: {}; their classes "
          "count but no sample teaches them",
          root_.string(), empty.size(), classes.size(), quote_cut(fmt::format("{}", fmt::join(empty, ", "))));
    }
    const int found = static_cast<int>(classes.size());
    if (num_classes != 0 && num_classes < found) {
      throw DataError(fmt::format("image folder {} has {} class folders, more than the {} classes configured",
                                  root_.string(), found, num_classes));
    }
    num_classes_ = num_classes == 0 ? found : num_classes;
  }

  std::size_t size() const override { return files_.size(); }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  std::int32_t read(std::size_t index, std::span<float> out) const override {
    detail::check_read(*this, index, out);
    const std::string name = files_[index].string();
    const auto image = detail::decode_image(read_whole(files_[index]), name, shape_.channels);
    detail::fit_image(image, shape_.height, shape_.width, fit_, out);
    return labels_[index];
  }

  std::string describe() const override {
    const std::size_t shown = std::min<std::size_t>(class_names_.size(), 5);
    const std::vector<std::string> first(class_names_.begin(),
                                         class_names_.begin() + static_cast<std::ptrdiff_t>(shown));
    return fmt::format("image folder {}: {} images in {} classes ({}{}), decoded to {}x{}x{} ({})", root_.string(),
                       files_.size(), class_names_.size(), fmt::join(first, ", "),
                       class_names_.size() > shown ? ", ..." : "", shape_.channels, shape_.height, shape_.width,
                       to_string(fit_));
  }

 private:
  std::filesystem::path root_;
  SampleShape shape_;
  ImageFit fit_;
  int num_classes_ = 0;
  std::vector<std::string> class_names_;
  std::vector<std::filesystem::path> files_;
  std::vector<std::int32_t> labels_;
};

}  // namespace

ImageFit parse_image_fit(std::string_view name) {
  if (name == "resize") return ImageFit::resize;
  if (name == "crop") return ImageFit::crop;
  throw DataError(fmt::format("unknown image fit '{}' (expected resize or crop)", name));
}

std::string_view to_string(ImageFit fit) { return fit == ImageFit::crop ? "crop" : "resize"; }

std::shared_ptr<const Source> make_image_folder_source(const std::filesystem::path& root, SampleShape shape,
                                                       int num_classes, ImageFit fit) {
  if (num_classes < 0) throw DataError(fmt::format("image folder {}: negative number of classes", root.string()));
  return std::make_shared<ImageFolderSource>(root, shape, num_classes, fit);
}

}  // namespace tnt::data
