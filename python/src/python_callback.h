#pragma once
// A user's callback written in Python (a tnt.callbacks.Callback) as a trainer::Callback.
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>

#include "tnt/trainer/trainer.h"

namespace tnt::python {

// A run's logs (loss, metrics) as a Python dict, as Keras hands them to callbacks and History.
pybind11::dict to_dict(const trainer::Logs& logs);

// Calls the Python object's Keras-named hooks with the GIL taken, on the ranks where it runs
// (tnt.callbacks.Callback.run_on_all_ranks; else the master only), and skips the per-step hook
// entirely where the class does not override it, so that Python is not in the step loop.
// After each hook, `model.stop_training` set to True asks the run to stop: the request rides
// the step's agreement (Note [Run control]), so every rank stops at the same step.
//
// A Python exception in a hook is kept (error()) and ends fit with a tnt::Error naming it; the
// binding then raises the original exception. Hooks after a failure do nothing.
class PythonCallback : public trainer::Callback {
 public:
  // Call with the GIL held; destroy with it held too.
  PythonCallback(pybind11::object callback, pybind11::object model, bool here);
  ~PythonCallback() override;

  void on_train_begin() override;
  void on_epoch_begin(std::size_t epoch) override;
  void on_batch_end(std::size_t epoch, std::size_t step, const trainer::Logs& logs) override;
  void on_epoch_end(std::size_t epoch, const trainer::Logs& logs) override;
  void on_train_end(const trainer::Logs& logs) override;

  // The exception a hook raised, if any (GIL held).
  pybind11::error_already_set* error() { return error_.get(); }

 private:
  template <class... Args>
  void call(const char* hook, Args&&... args);

  pybind11::object callback_, model_;
  bool here_;
  bool batch_hook_;
  std::unique_ptr<pybind11::error_already_set> error_;
};

}  // namespace tnt::python
