#pragma once
#include <fmt/format.h>

#include "tnt/dataset/error.h"
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

}  // namespace tnt::data::detail
