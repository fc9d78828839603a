// tnt._tnt.Trainer: trainer::Trainer for tnt.Model (tnt/models.py). Its options come as run-file
// settings ("section.key=value", TOML values), read by the trainer's own run configuration, so
// compile's and fit's keyword arguments are tnt-train's run keys (Note [Run keys]) and mean what
// they mean there. The GIL is released while tnt computes and communicates.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "array_source.h"
#include "bindings.h"
#include "python_callback.h"
#include "run_callbacks.h"
#include "run_config.h"
#include "tnt/compute/spec.h"
#include "tnt/compute/zoo.h"

namespace py = pybind11;

namespace tnt::python {
namespace {

trainer::RunConfig read_settings(const std::vector<std::string>& settings, const char* origin) {
  return trainer::parse_run_config("", origin, settings);
}

// Note [Interrupts during fit]: Python runs its signal handlers (Ctrl-C's KeyboardInterrupt) on
// the main thread, between bytecodes, which a fit that holds the main thread in C++ for minutes
// never reaches. So fit runs on a thread of its own while the calling thread waits without the
// GIL and asks Python every 100 ms whether a handler raised. If one did, InterruptStop asks the
// run to stop (agreed by every rank as any callback's request: Note [Run control]); fit then
// returns at a step boundary, and the handler's exception is raised. Under tnt-launch every rank
// receives the SIGINT, so every rank raises KeyboardInterrupt, and tnt's excepthook
// (tnt/__init__.py) ends each with status 130.
class InterruptStop : public trainer::Callback {
 public:
  void on_train_begin() override {
    std::lock_guard lock(mutex_);
    running_ = true;
    if (pending_) run().stop_training(reason_);
  }
  void on_train_end(const trainer::Logs&) override {
    std::lock_guard lock(mutex_);
    running_ = false;
  }
  void stop(const std::string& reason) {
    std::lock_guard lock(mutex_);
    reason_ = reason;
    pending_ = true;
    if (running_) run().stop_training(reason);
  }

 private:
  std::mutex mutex_;
  bool running_ = false, pending_ = false;
  std::string reason_;
};

class PyTrainer;
std::set<PyTrainer*> g_trainers;  // alive, under the GIL

class PyTrainer {
 public:
  PyTrainer(const std::string& model_toml, std::uint64_t seed) {
    auto spec = compute::parse_model_toml(model_toml, "the model");
    auto& s = session();
    py::gil_scoped_release release;
    trainer_ = std::make_unique<trainer::Trainer>(s, std::move(spec));
    trainer_->initialize(seed);
    g_trainers.insert(this);
  }
  ~PyTrainer() { g_trainers.erase(this); }
  PyTrainer(const PyTrainer&) = delete;
  PyTrainer& operator=(const PyTrainer&) = delete;

  void release() {
    py::gil_scoped_release release;
    trainer_.reset();
  }

  std::string model_toml() { return compute::to_toml(t().model().spec()); }
  std::int64_t parameter_count() { return t().model().total_parameter_size(); }

  void compile(const std::vector<std::string>& settings) {
    const auto config = read_settings(settings, "Model.compile");
    t().compile(trainer::compile_options(config));
  }

  // `settings`: compile's and fit's, as one run. Returns the History's figures.
  py::dict fit(const SourceHandle& train, std::optional<SourceHandle> validation,
               const std::vector<std::string>& settings, bool shuffle, const py::list& callbacks, py::object model) {
    auto config = read_settings(settings, "Model.fit");
    trainer::validate(config);
    trainer::Sources sources;
    sources.train = train.source;
    if (validation) sources.test = validation->source;
    auto options = trainer::fit_options(config, sources);
    options.shuffle = shuffle;
    const auto builtin = trainer::make_run_callbacks(config, t());
    for (const auto& callback : builtin) options.callbacks.push_back(callback.get());
    const bool master = session().is_master_rank();
    // They hold Python objects: destroyed here, with the GIL held.
    std::vector<std::unique_ptr<PythonCallback>> bridges;
    for (const auto& callback : callbacks) {
      const bool everywhere = callback.attr("run_on_all_ranks").cast<bool>();
      bridges.push_back(
          std::make_unique<PythonCallback>(py::reinterpret_borrow<py::object>(callback), model, everywhere || master));
      options.callbacks.push_back(bridges.back().get());
    }
    InterruptStop interrupt_stop;
    options.callbacks.push_back(&interrupt_stop);
    trainer::History history;
    std::optional<py::error_already_set> interrupt;
    std::exception_ptr failure;
    try {
      history = fit_watching_signals(sources.train, options, interrupt_stop, interrupt);
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
    // A Python callback's own exception, as it was raised, rather than tnt's account of it; then
    // tnt's failure; then the signal handler's exception (KeyboardInterrupt) once fit stopped.
    for (auto& bridge : bridges)
      if (auto* error = bridge->error()) throw std::move(*error);
    if (failure) std::rethrow_exception(failure);
    if (interrupt) throw std::move(*interrupt);
    py::list epochs;
    for (const auto& logs : history.epochs) epochs.append(to_dict(logs));
    py::dict out;
    out["epochs"] = epochs;
    out["steps"] = history.steps;
    out["seconds"] = history.seconds;
    out["samples_per_second"] = history.samples_per_second;
    return out;
  }

  py::dict evaluate(const SourceHandle& source, const std::vector<std::string>& settings) {
    const auto config = read_settings(settings, "Model.evaluate");
    trainer::Logs logs;
    {
      py::gil_scoped_release release;
      logs = t().evaluate(source.source, config.eval_batch, trainer::eval_transform(config),
                          config.distribute_validation_dataset);
    }
    return to_dict(logs);
  }

  py::array_t<float> predict(const SourceHandle& source, const std::vector<std::string>& settings, bool every_rank) {
    const auto config = read_settings(settings, "Model.predict");
    compute::Tensor p;
    {
      py::gil_scoped_release release;
      p = t().predict(
          source.source, config.eval_batch, trainer::eval_transform(config),
          every_rank ? trainer::Trainer::PredictionsOn::every_rank : trainer::Trainer::PredictionsOn::master);
    }
    const auto rows = p.dim(0), columns = p.dim(1);
    py::array_t<float> out({rows, columns});
    std::copy_n(p.data(), rows * columns, out.mutable_data());
    return out;
  }

  void save_weights(const std::string& path) {
    py::gil_scoped_release release;
    t().save_weights(path);
  }
  void load_weights(const std::string& path) {
    py::gil_scoped_release release;
    t().load_weights(path);
  }
  void save_checkpoint(const std::string& path) {
    py::gil_scoped_release release;
    t().save_checkpoint(path);
  }
  // output: "softmax", "sigmoid", "none", or "" for what predict gives.
  void export_onnx(const std::string& path, const std::string& output) {
    std::optional<compute::OnnxOutput> kind;
    if (!output.empty()) kind = compute::parse_onnx_output(output);
    py::gil_scoped_release release;
    t().export_onnx(path, kind);
  }

 private:
  // Call with the GIL held; returns with it held. `interrupt` receives the exception a Python
  // signal handler raised meanwhile (Note [Interrupts during fit]).
  trainer::History fit_watching_signals(const std::shared_ptr<const data::Source>& train,
                                        const trainer::FitOptions& options, InterruptStop& stop,
                                        std::optional<py::error_already_set>& interrupt) {
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
    trainer::History history;
    std::exception_ptr failure;
    auto& fitted = t();
    std::thread worker([&] {
      try {
        history = fitted.fit(train, options);
      } catch (...) {
        failure = std::current_exception();
      }
      std::lock_guard lock(mutex);
      done = true;
      finished.notify_all();
    });
    try {
      for (;;) {
        {
          py::gil_scoped_release release;
          std::unique_lock lock(mutex);
          if (finished.wait_for(lock, std::chrono::milliseconds(100), [&] { return done; })) break;
        }
        if (!interrupt && PyErr_CheckSignals() != 0) {
          interrupt.emplace();  // takes the handler's exception out of Python's error indicator
          stop.stop(fmt::format("interrupted ({})", py::str(interrupt->type().attr("__name__")).cast<std::string>()));
        }
      }
    } catch (...) {
      // The worker uses this frame's variables: it must end before they do.
      py::gil_scoped_release release;
      worker.join();
      throw;
    }
    worker.join();
    if (failure) std::rethrow_exception(failure);
    return history;
  }

  trainer::Trainer& t() {
    if (!trainer_) throw Error("this Model's trainer was released when the process left its tnt job");
    return *trainer_;
  }

  std::unique_ptr<trainer::Trainer> trainer_;
};

}  // namespace

void release_trainers() {
  for (auto* t : g_trainers) t->release();
}

namespace {

// The run keys (Note [Run keys]) as (section, key, type, help) for tnt/options.py.
py::list run_keys() {
  static const char* const types[] = {"str", "bool",      "float",       "int",      "int",
                                      "int", "list[int]", "list[float]", "list[str]"};
  static_assert(std::variant_size_v<trainer::AnyField> == std::size(types));
  py::list keys;
  for (const auto& k : trainer::run_keys()) {
    keys.append(py::make_tuple(k.section, k.key, k.path ? "path" : types[k.field.index()], k.help ? k.help : ""));
  }
  return keys;
}

}  // namespace

void bind_trainer(py::module_& m) {
  py::class_<PyTrainer>(m, "Trainer", "tnt's data-parallel trainer (use tnt.Model)")
      .def(py::init<const std::string&, std::uint64_t>(), py::arg("model_toml"), py::arg("seed"))
      .def("model_toml", &PyTrainer::model_toml)
      .def("parameter_count", &PyTrainer::parameter_count)
      .def("compile", &PyTrainer::compile, py::arg("settings"))
      .def("fit", &PyTrainer::fit, py::arg("train"), py::arg("validation"), py::arg("settings"), py::arg("shuffle"),
           py::arg("callbacks"), py::arg("model"))
      .def("evaluate", &PyTrainer::evaluate, py::arg("source"), py::arg("settings"))
      .def("predict", &PyTrainer::predict, py::arg("source"), py::arg("settings"), py::arg("every_rank"))
      .def("save_weights", &PyTrainer::save_weights, py::arg("path"))
      .def("load_weights", &PyTrainer::load_weights, py::arg("path"))
      .def("save_checkpoint", &PyTrainer::save_checkpoint, py::arg("path"))
      .def("export_onnx", &PyTrainer::export_onnx, py::arg("path"), py::arg("output"));
  m.def("run_keys", &run_keys, "The trainer's run keys: (section, key, type, help)");
  m.def(
      "zoo_model_toml",
      [](const std::string& name, std::vector<std::int64_t> input, std::int64_t classes) {
        trainer::RunConfig config;
        config.model = name;
        config.classes = classes;
        if (input.empty()) {
          const auto names = compute::zoo::names();
          if (std::find(names.begin(), names.end(), name) == names.end()) {
            throw ConfigError(fmt::format("from_zoo('{}'): no such zoo model (zoo: {})", name, fmt::join(names, ", ")));
          }
          const auto zoo_input = compute::zoo::by_name(name).input;
          input.assign(zoo_input.begin(), zoo_input.end());
        }
        if (input.size() == 1) input = {input[0], 1, 1};
        if (input.size() != 3) {
          throw ConfigError(fmt::format("from_zoo('{}'): input_shape must be (channels, height, width)", name));
        }
        const data::SampleShape shape{static_cast<std::size_t>(input[0]), static_cast<std::size_t>(input[1]),
                                      static_cast<std::size_t>(input[2])};
        return compute::to_toml(trainer::resolve_model(config, static_cast<int>(classes), shape));
      },
      py::arg("name"), py::arg("input_shape"), py::arg("classes"));
  m.def(
      "load_model_toml", [](const std::string& path) { return compute::to_toml(compute::load_model_toml(path)); },
      py::arg("path"));
  m.def(
      "check_model_toml",
      [](const std::string& text) { return compute::to_toml(compute::parse_model_toml(text, "tnt.Sequential")); },
      py::arg("text"));
}

}  // namespace tnt::python
