#include "array_source.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cstring>

#include "bindings.h"
#include "tnt/core/error.h"

namespace py = pybind11;

namespace tnt::python {
namespace {

class ArraySource : public data::Source {
 public:
  ArraySource(py::array features, py::object labels, int num_classes, std::string name)
      : features_(std::move(features)), labels_object_(std::move(labels)), name_(std::move(name)) {
    const bool is_u8 = holds<std::uint8_t>(features_);
    if (!is_u8 && !holds<float>(features_)) {
      throw DataError(fmt::format("{}: features must be uint8 or float32 here", name_));
    }
    if (!(features_.flags() & py::array::c_style)) throw DataError(fmt::format("{}: features not C-contiguous", name_));
    if (features_.ndim() < 2 || features_.ndim() > 4) {
      throw DataError(fmt::format("{}: features of {} dimensions; expected 2 to 4 (N first)", name_, features_.ndim()));
    }
    bytes_ = is_u8;
    size_ = static_cast<std::size_t>(features_.shape(0));
    // {N, F} is F channels of 1x1, {N, H, W} one channel, as the .npy source reads them.
    const auto dim = [&](int d) { return static_cast<std::size_t>(features_.shape(d)); };
    if (features_.ndim() == 2) shape_ = {dim(1), 1, 1};
    if (features_.ndim() == 3) shape_ = {1, dim(1), dim(2)};
    if (features_.ndim() == 4) shape_ = {dim(1), dim(2), dim(3)};
    if (!labels_object_.is_none()) {
      auto label_array = labels_object_.cast<py::array>();
      if (!holds<std::int32_t>(label_array) || !(label_array.flags() & py::array::c_style) || label_array.ndim() != 1 ||
          static_cast<std::size_t>(label_array.shape(0)) != size_) {
        throw DataError(fmt::format("{}: labels must be int32, C-contiguous and {} long here", name_, size_));
      }
      labels_ = static_cast<const std::int32_t*>(label_array.data());
    }
    num_classes_ = num_classes;
    data_ = features_.data();
  }

  std::size_t size() const override { return size_; }
  data::SampleShape shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  std::int32_t read(std::size_t index, std::span<float> out) const override {
    const std::size_t n = shape_.elements();
    if (index >= size_) throw DataError(fmt::format("{}: sample {} of {}", name_, index, size_));
    if (out.size() != n) throw DataError(fmt::format("{}: {} floats asked for, a sample has {}", name_, out.size(), n));
    if (bytes_) {
      const auto* pixels = static_cast<const std::uint8_t*>(data_) + index * n;
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(pixels[i]) * (1.0f / 255.0f);
    } else {
      std::memcpy(out.data(), static_cast<const float*>(data_) + index * n, n * sizeof(float));
    }
    return labels_ ? labels_[index] : 0;
  }

  std::string describe() const override {
    return fmt::format("NumPy arrays '{}': {} samples of {}x{}x{} ({}), {} classes", name_, size_, shape_.channels,
                       shape_.height, shape_.width, bytes_ ? "uint8 scaled to [0, 1]" : "float32", num_classes_);
  }

 private:
  py::array features_;
  py::object labels_object_;
  std::string name_;
  const void* data_ = nullptr;
  const std::int32_t* labels_ = nullptr;
  bool bytes_ = false;
  std::size_t size_ = 0;
  data::SampleShape shape_;
  int num_classes_ = 0;
};

}  // namespace

std::shared_ptr<const data::Source> make_array_source(py::array features, py::object labels, int num_classes,
                                                      const std::string& name) {
  auto* source = new ArraySource(std::move(features), std::move(labels), num_classes, name);
  return std::shared_ptr<const data::Source>(source, [](const data::Source* s) {
    py::gil_scoped_acquire gil;
    delete s;
  });
}

void bind_sources(py::module_& m) {
  py::class_<SourceHandle>(m, "Source", "A data source of tnt (NumPy arrays or a built-in data set)")
      .def_property_readonly("size", [](const SourceHandle& h) { return h.source->size(); })
      .def_property_readonly("num_classes", [](const SourceHandle& h) { return h.source->num_classes(); })
      .def_property_readonly("shape",
                             [](const SourceHandle& h) {
                               const auto s = h.source->shape();
                               return py::make_tuple(s.channels, s.height, s.width);
                             })
      .def("describe", [](const SourceHandle& h) { return h.source->describe(); });
  m.def(
      "array_source",
      [](py::array features, py::object labels, int num_classes, const std::string& name) {
        return SourceHandle{make_array_source(std::move(features), std::move(labels), num_classes, name)};
      },
      py::arg("features"), py::arg("labels"), py::arg("num_classes"), py::arg("name"));
  m.def(
      "dataset_source",
      [](const std::string& kind, const std::string& split, const std::string& path, std::size_t size) {
        data::SourceConfig config;
        config.kind = data::parse_source_kind(kind);
        config.split = data::parse_split(split);
        config.path = path;
        config.size = size;
        return SourceHandle{data::make_source(config)};
      },
      py::arg("kind"), py::arg("split") = "train", py::arg("path") = "", py::arg("size") = 0,
      "A built-in data set's split (fashion-mnist, mnist, cifar10), found as tnt-train finds it");
  m.def(
      "locate_dataset",
      [](const std::string& name, const std::vector<std::string>& required) {
        return data::locate_dataset(name, required).string();
      },
      py::arg("name"), py::arg("required"));
}

}  // namespace tnt::python
