#pragma once
// Random-access sample sources: IDX (MNIST, Fashion-MNIST; raw or gzip), CIFAR-10 binary,
// NumPy .npy arrays, a folder of PNG/JPEG images (one subfolder per class), synthetic
// ImageNet-like data, in-memory arrays.
//
// Concurrency: a Source is immutable after construction; read() is const and may be called
// from any number of threads at once.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tnt::data {

struct SampleShape {
  std::size_t channels = 1;
  std::size_t height = 1;
  std::size_t width = 1;
  std::size_t elements() const { return channels * height * width; }
  friend bool operator==(const SampleShape&, const SampleShape&) = default;
};

class Source {
 public:
  virtual ~Source() = default;
  virtual std::size_t size() const = 0;
  virtual SampleShape shape() const = 0;
  virtual int num_classes() const = 0;
  // Writes sample `index` as shape().elements() floats in CHW order into `out` (pixels of
  // stored 8-bit images are scaled to [0, 1]) and returns its label in [0, num_classes()).
  // Throws DataError for an index >= size() or an `out` of the wrong size.
  virtual std::int32_t read(std::size_t index, std::span<float> out) const = 0;
  // One line for logs: kind, files, size, shape.
  virtual std::string describe() const = 0;
};

enum class SourceKind { fashion_mnist, mnist, idx, cifar10, npy, image_folder, synthetic, memory };

// How an image of another size becomes the model's H×W.
enum class ImageFit {
  resize,  // scale to H×W, ignoring the aspect ratio
  crop,    // cut the largest centred region of H:W's aspect ratio, then scale it to H×W
};
ImageFit parse_image_fit(std::string_view name);  // "resize" | "crop"
std::string_view to_string(ImageFit fit);
enum class Split { train, test };

SourceKind parse_source_kind(std::string_view name);  // "fashion-mnist", "mnist", "idx", "npy", "image-folder", ...
std::string_view to_string(SourceKind kind);
Split parse_split(std::string_view name);  // "train" | "test"

struct SourceConfig {
  SourceKind kind = SourceKind::fashion_mnist;
  // fashion-mnist / mnist / cifar10: the data set's directory; empty = search (see locate_dataset).
  //   cifar10 also accepts one batch file (*.bin).
  // idx: the image file (IDX3 N×H×W or IDX4 N×C×H×W, unsigned bytes, raw or gzip).
  // npy: the features (.npy, float32 or uint8, C order). image-folder: the folder of class folders.
  std::string path;
  std::string labels_path;  // idx: the label file (IDX1); npy: the labels (.npy, {N} class indices)
  Split split = Split::train;
  // idx: labels must lie in [0, num_classes) (0 = 10); npy: the same (0 = largest label + 1);
  // image-folder: at least the number of class folders (0 = that number); synthetic: number of classes.
  int num_classes = 0;
  // synthetic: the samples' shape. npy: the shape the model expects (checked; {0,0,0} = as the
  // file says). image-folder: every image is decoded to this many channels (1 or 3) and fitted
  // to H×W.
  SampleShape shape{3, 224, 224};
  ImageFit image_fit = ImageFit::resize;  // image-folder only
  // synthetic: number of samples (required). Other kinds: if > 0, use only the first `size`.
  std::size_t size = 0;
  std::uint64_t seed = 0;  // synthetic only
  // memory only: size × shape.elements() floats (CHW per sample) and size labels.
  std::vector<float> memory_images;
  std::vector<std::int32_t> memory_labels;
};

std::shared_ptr<const Source> make_source(const SourceConfig& config);

std::shared_ptr<const Source> make_idx_source(const std::filesystem::path& images, const std::filesystem::path& labels,
                                              int num_classes = 10);
// NumPy arrays: features {N, C, H, W}, {N, H, W} or {N, C·H·W} (float32 as they are, uint8 scaled to
// [0, 1]) and labels {N} or {N, 1} (integers, uint8 or whole float32 values in [0, num_classes);
// num_classes 0 = largest + 1). With `expected`, the features must have that sample shape (a flat
// {N, C·H·W} is taken in C order). Throws DataError naming the file.
std::shared_ptr<const Source> make_npy_source(const std::filesystem::path& features,
                                              const std::filesystem::path& labels, int num_classes = 0,
                                              std::optional<SampleShape> expected = std::nullopt);
// A folder with one subfolder per class (sorted by name: label 0 is the first), each holding
// PNG and JPEG files (.png, .jpg, .jpeg, any case; other files are skipped), decoded on every
// read() to shape.channels channels and fitted to shape.height × shape.width. Files are checked
// for a PNG or JPEG signature here; a file that fails to decode later throws DataError naming it.
std::shared_ptr<const Source> make_image_folder_source(const std::filesystem::path& root, SampleShape shape,
                                                       int num_classes = 0, ImageFit fit = ImageFit::resize);
std::shared_ptr<const Source> make_cifar10_source(const std::vector<std::filesystem::path>& files);
std::shared_ptr<const Source> make_synthetic_source(SampleShape shape, int num_classes, std::size_t size,
                                                    std::uint64_t seed);
std::shared_ptr<const Source> make_memory_source(SampleShape shape, int num_classes, std::vector<float> images,
                                                 std::vector<std::int32_t> labels);
// Samples [begin, begin + count) of `base`, renumbered from 0 (a shard, or a quick subset).
std::shared_ptr<const Source> make_subset(std::shared_ptr<const Source> base, std::size_t begin, std::size_t count);

// Finds the directory of data set `name` ("fashion-mnist", "mnist", "cifar10") that holds every
// file in `required` (each may also be present with a ".gz" suffix). Tried in order: `explicit_dir`
// if not empty (and then only it), $TNT_DATA_DIR/<name>, $TNT_DATA_DIR, then
// <prefix>/share/datasets/<name> for the prefixes /usr and /usr/local, then `extra_dirs` (where a
// package installs outside share/datasets, e.g. /usr/share/dictd). Throws DataError listing every
// place tried.
std::filesystem::path locate_dataset(std::string_view name, const std::vector<std::string>& required,
                                     const std::filesystem::path& explicit_dir = {},
                                     const std::vector<std::filesystem::path>& extra_dirs = {});

}  // namespace tnt::data
