#include "python_callback.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "tnt/core/error.h"

namespace py = pybind11;

namespace tnt::python {

py::dict to_dict(const trainer::Logs& logs) {
  py::dict d;
  for (const auto& [key, value] : logs) d[py::str(key)] = value;
  return d;
}

namespace {

// Whether the class of `object` overrides Callback.`hook`.
bool overrides(const py::object& object, const char* hook) {
  const auto base = py::module_::import("tnt.callbacks").attr("Callback");
  return !py::type::of(object).attr(hook).is(base.attr(hook));
}

}  // namespace

PythonCallback::PythonCallback(py::object callback, py::object model, bool here)
    : callback_(std::move(callback)), model_(std::move(model)), here_(here) {
  batch_hook_ = overrides(callback_, "on_train_batch_end") || overrides(callback_, "on_batch_end");
}

PythonCallback::~PythonCallback() = default;

template <class... Args>
void PythonCallback::call(const char* hook, Args&&... args) {
  if (!here_) return;
  py::gil_scoped_acquire gil;
  if (error_) return;
  try {
    callback_.attr(hook)(std::forward<Args>(args)...);
    if (model_.attr("stop_training").cast<bool>() && !run().stop_requested()) {
      run().stop_training(fmt::format("{}.{} set model.stop_training",
                                      py::str(py::type::of(callback_).attr("__name__")).cast<std::string>(), hook));
    }
  } catch (py::error_already_set& e) {
    const std::string what = e.what();
    error_ = std::make_unique<py::error_already_set>(std::move(e));
    throw Error(fmt::format("a Python callback's {} raised {}", hook, what));
  }
}

void PythonCallback::on_train_begin() {
  if (!here_) return;
  py::gil_scoped_acquire gil;
  call("on_train_begin", py::dict());
}
void PythonCallback::on_epoch_begin(std::size_t epoch) {
  if (!here_) return;
  py::gil_scoped_acquire gil;
  call("on_epoch_begin", epoch, py::dict());
}
void PythonCallback::on_batch_end(std::size_t, std::size_t step, const trainer::Logs& logs) {
  if (!batch_hook_ || !here_) return;
  py::gil_scoped_acquire gil;
  call("on_train_batch_end", step, to_dict(logs));
}
void PythonCallback::on_epoch_end(std::size_t epoch, const trainer::Logs& logs) {
  if (!here_) return;
  py::gil_scoped_acquire gil;
  call("on_epoch_end", epoch, to_dict(logs));
}
void PythonCallback::on_train_end(const trainer::Logs& logs) {
  if (!here_) return;
  py::gil_scoped_acquire gil;
  call("on_train_end", to_dict(logs));
}

}  // namespace tnt::python
