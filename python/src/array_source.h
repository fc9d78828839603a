#pragma once
// A data::Source over NumPy arrays, read in place (no copy): features of dtype uint8 (pixels,
// scaled to [0, 1] exactly as the IDX and .npy sources scale them, so that the same bytes give
// the same floats) or float32, C-contiguous, shaped {N} + the model's input; labels of dtype
// int32, C-contiguous, shaped {N}. tnt/data.py brings other arrays to this form (once, with a
// note in the log) or refuses them.
#include <pybind11/numpy.h>

#include <memory>
#include <string>

#include "tnt/dataset/source.h"

namespace tnt::python {

// The arrays stay referenced as long as the source lives; the source may be released on any
// thread (the trainer's), so its deleter takes the GIL to drop them.
std::shared_ptr<const data::Source> make_array_source(pybind11::array features, pybind11::object labels,
                                                      int num_classes, const std::string& name);

// What Python holds: a source of any kind (arrays or a built-in data set).
struct SourceHandle {
  std::shared_ptr<const data::Source> source;
};

}  // namespace tnt::python
