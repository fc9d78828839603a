#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tnt/dataset/dictzip.h"
#include "tnt/dataset/error.h"
#include "tnt/dataset/freedict.h"
#include "tnt/dataset/source.h"

namespace tnt::data::detail {

inline void check_read(const Source& source, std::size_t index, std::span<float> out) {
  if (index >= source.size()) {
    throw DataError(fmt::format("sample index {} is out of range: the source holds {} ({})", index, source.size(),
                                source.describe()));
  }
  if (out.size() != source.shape().elements()) {
    throw DataError(fmt::format("read buffer of {} floats for a sample of {} ({})", out.size(),
                                source.shape().elements(), source.describe()));
  }
}

// The IDX and CIFAR-10 sources from file contents already in memory: the factories read the files,
// fuzz/ hands in bytes. The names stand for the files in messages. Throw DataError on bad input.
std::shared_ptr<const Source> idx_source_from_bytes(std::vector<std::uint8_t> images, const std::string& images_path,
                                                    std::vector<std::uint8_t> labels, const std::string& labels_path,
                                                    int num_classes);
std::shared_ptr<const Source> npy_source_from_bytes(std::vector<std::uint8_t> features,
                                                    const std::string& features_path, std::vector<std::uint8_t> labels,
                                                    const std::string& labels_path, int num_classes,
                                                    std::optional<SampleShape> expected);
std::shared_ptr<const Source> cifar10_source_from_bytes(std::vector<std::vector<std::uint8_t>> batches,
                                                        const std::vector<std::string>& paths);

// The FreeDict corpus from the index file's contents (already gunzipped) and the text, opened
// once the index has been checked: load_freedict after it has found the files. Throws DataError
// as load_freedict does.
FreedictCorpus freedict_from_parts(const std::vector<std::uint8_t>& index, const std::filesystem::path& index_path,
                                   const std::function<DictzipReader()>& open_text, const FreedictOptions& options);

}  // namespace tnt::data::detail
