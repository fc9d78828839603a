// make_source and locate_dataset: from a small config to a Source, finding installed data sets.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <utility>

#include "tnt/core/settings.h"
#include "tnt/dataset/error.h"
#include "tnt/dataset/source.h"

namespace tnt::data {
namespace {

constexpr std::pair<SourceKind, std::string_view> kKindNames[] = {{SourceKind::fashion_mnist, "fashion-mnist"},
                                                                  {SourceKind::mnist, "mnist"},
                                                                  {SourceKind::idx, "idx"},
                                                                  {SourceKind::cifar10, "cifar10"},
                                                                  {SourceKind::npy, "npy"},
                                                                  {SourceKind::image_folder, "image-folder"},
                                                                  {SourceKind::synthetic, "synthetic"},
                                                                  {SourceKind::memory, "memory"}};

// Data-set packages install under <prefix>/share/datasets/<name> (Debian: dataset-fashion-mnist).
constexpr std::string_view kPrefixes[] = {"/usr", "/usr/local"};

bool has_file(const std::filesystem::path& dir, const std::string& name) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / name, ec) || std::filesystem::is_regular_file(dir / (name + ".gz"), ec);
}

// The plain file if present, else its gzip form (read_file_bytes handles both).
std::filesystem::path pick_file(const std::filesystem::path& dir, const std::string& name) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir / name, ec)) return dir / name;
  return dir / (name + ".gz");
}

std::filesystem::path locate_any(const std::vector<std::string>& names, const std::vector<std::string>& required,
                                 const std::filesystem::path& explicit_dir,
                                 const std::vector<std::filesystem::path>& extra_dirs = {}) {
  std::vector<std::filesystem::path> candidates;
  if (!explicit_dir.empty()) {
    candidates.push_back(explicit_dir);
  } else {
    if (const std::string dir = settings::kDataDir.read(); !dir.empty()) {
      for (const auto& name : names) candidates.push_back(std::filesystem::path(dir) / name);
      candidates.emplace_back(dir);
    }
    for (auto prefix : kPrefixes) {
      for (const auto& name : names) {
        candidates.push_back(std::filesystem::path(prefix) / "share" / "datasets" / name);
      }
    }
    candidates.insert(candidates.end(), extra_dirs.begin(), extra_dirs.end());
  }
  for (const auto& dir : candidates) {
    bool all = true;
    for (const auto& file : required) all = all && has_file(dir, file);
    if (all) return dir;
  }
  std::vector<std::string> tried;
  for (const auto& dir : candidates) tried.push_back(dir.string());
  throw DataError(fmt::format("data set {} not found: no directory holds {} (each may be .gz); tried {}{}",
                              fmt::join(names, "/"), fmt::join(required, ", "), fmt::join(tried, ", "),
                              explicit_dir.empty() ? "; set TNT_DATA_DIR or give the path" : ""));
}

std::shared_ptr<const Source> make_mnist_like(std::string_view name, const SourceConfig& config) {
  const std::string prefix = config.split == Split::train ? "train" : "t10k";
  const std::string images = prefix + "-images-idx3-ubyte";
  const std::string labels = prefix + "-labels-idx1-ubyte";
  const auto dir = locate_any({std::string(name)}, {images, labels}, config.path);
  return make_idx_source(pick_file(dir, images), pick_file(dir, labels), 10);
}

std::shared_ptr<const Source> make_cifar10(const SourceConfig& config) {
  std::error_code ec;
  if (!config.path.empty() && !std::filesystem::is_directory(config.path, ec)) {
    return make_cifar10_source({config.path});  // one batch file (or a missing path: clear error)
  }
  std::vector<std::string> files;
  if (config.split == Split::train) {
    for (int i = 1; i <= 5; ++i) files.push_back(fmt::format("data_batch_{}.bin", i));
  } else {
    files.push_back("test_batch.bin");
  }
  const auto dir = locate_any({"cifar10", "cifar-10-batches-bin"}, files, config.path);
  std::vector<std::filesystem::path> paths;
  for (const auto& f : files) paths.push_back(pick_file(dir, f));
  return make_cifar10_source(paths);
}

}  // namespace

SourceKind parse_source_kind(std::string_view name) {
  for (const auto& [kind, text] : kKindNames) {
    if (text == name) return kind;
  }
  throw DataError(
      fmt::format("unknown data source kind '{}' (expected fashion-mnist, mnist, idx, cifar10, npy, image-folder, "
                  "synthetic or memory)",
                  quote_cut(name)));
}

std::string_view to_string(SourceKind kind) {
  for (const auto& [k, text] : kKindNames) {
    if (k == kind) return text;
  }
  return "unknown";
}

Split parse_split(std::string_view name) {
  if (name == "train") return Split::train;
  if (name == "test") return Split::test;
  throw DataError(fmt::format("unknown data split '{}' (expected train or test)", name));
}

std::filesystem::path locate_dataset(std::string_view name, const std::vector<std::string>& required,
                                     const std::filesystem::path& explicit_dir,
                                     const std::vector<std::filesystem::path>& extra_dirs) {
  return locate_any({std::string(name)}, required, explicit_dir, extra_dirs);
}

std::shared_ptr<const Source> make_source(const SourceConfig& config) {
  std::shared_ptr<const Source> source;
  switch (config.kind) {
    case SourceKind::fashion_mnist: source = make_mnist_like("fashion-mnist", config); break;
    case SourceKind::mnist: source = make_mnist_like("mnist", config); break;
    case SourceKind::idx:
      if (config.path.empty() || config.labels_path.empty()) {
        throw DataError(
            "idx source: both the image file (path) and the label file (labels_path) "
            "are required");
      }
      source = make_idx_source(config.path, config.labels_path, config.num_classes == 0 ? 10 : config.num_classes);
      break;
    case SourceKind::cifar10: source = make_cifar10(config); break;
    case SourceKind::npy: {
      if (config.path.empty() || config.labels_path.empty()) {
        throw DataError("npy source: both the features file (path) and the labels file (labels_path) are required");
      }
      std::optional<SampleShape> expected;
      if (config.shape.elements() != 0) expected = config.shape;
      source = make_npy_source(config.path, config.labels_path, config.num_classes, expected);
      break;
    }
    case SourceKind::image_folder:
      if (config.path.empty()) throw DataError("image-folder source: the folder (path) is required");
      source = make_image_folder_source(config.path, config.shape, config.num_classes, config.image_fit);
      break;
    case SourceKind::synthetic:
      return make_synthetic_source(config.shape, config.num_classes, config.size, config.seed);
    case SourceKind::memory:
      return make_memory_source(config.shape, config.num_classes, config.memory_images, config.memory_labels);
  }
  if (!source) throw DataError("unknown data source kind");
  if (config.size > 0) source = make_subset(std::move(source), 0, config.size);
  spdlog::debug("tnt::data: {}", source->describe());
  return source;
}

}  // namespace tnt::data
