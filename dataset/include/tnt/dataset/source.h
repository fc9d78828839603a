#pragma once
// Random-access sample sources: IDX (MNIST, Fashion-MNIST; raw or gzip), CIFAR-10 binary,
// synthetic ImageNet-like data, in-memory arrays.
//
// Concurrency: a Source is immutable after construction; read() is const and may be called
// from any number of threads at once.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
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

enum class SourceKind { fashion_mnist, mnist, idx, cifar10, synthetic, memory };
enum class Split { train, test };

SourceKind parse_source_kind(std::string_view name);  // "fashion-mnist", "mnist", "idx", ...
std::string_view to_string(SourceKind kind);
Split parse_split(std::string_view name);  // "train" | "test"

struct SourceConfig {
  SourceKind kind = SourceKind::fashion_mnist;
  // fashion-mnist / mnist / cifar10: the data set's directory; empty = search (see locate_dataset).
  //   cifar10 also accepts one batch file (*.bin).
  // idx: the image file (IDX3 N×H×W or IDX4 N×C×H×W, unsigned bytes, raw or gzip).
  std::string path;
  std::string labels_path;  // idx only: the label file (IDX1)
  Split split = Split::train;
  // idx: labels must lie in [0, num_classes) (0 = 10); synthetic: number of classes.
  int num_classes = 0;
  SampleShape shape{3, 224, 224};  // synthetic only
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
