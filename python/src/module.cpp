// tnt._tnt: the session, the errors and the log, and the module's other parts (bindings.h).
#include <fmt/format.h>
#include <pybind11/stl.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bindings.h"
#include "tnt/actors/errors.h"
#include "tnt/collectives/communicator.h"
#include "tnt/core/error.h"
#include "tnt/core/exit.h"

namespace py = pybind11;

namespace tnt::python {
namespace {

std::unique_ptr<trainer::Session> g_session;
bool g_left = false;

// The class of tnt/errors.py that stands for `e`. An actor's failure carries its cause, which
// decides (a lost peer inside fit is a JobError); the message stays the failure's, which also
// says where it happened.
const char* python_class(const std::exception& e) {
  if (const auto* failed = dynamic_cast<const actors::ActorFailed*>(&e); failed && failed->cause()) {
    try {
      std::rethrow_exception(failed->cause());
    } catch (const std::exception& cause) {
      return python_class(cause);
    } catch (...) {
      return "Error";
    }
  }
  if (dynamic_cast<const trainer::Preempted*>(&e)) return "Preempted";
  if (dynamic_cast<const trainer::NonFiniteError*>(&e)) return "NonFiniteError";
  if (dynamic_cast<const ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const JobError*>(&e)) return "JobError";
  if (dynamic_cast<const DataError*>(&e)) return "DataError";
  return "Error";
}

void translate(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    const auto errors = py::module_::import("tnt.errors");
    PyErr_SetString(errors.attr(python_class(e)).ptr(), e.what());
  }
}

}  // namespace

trainer::Session& session(int threads) {
  if (g_left) throw Error("this process has left its tnt job (at interpreter exit): tnt cannot be used any more");
  if (!g_session) {
    trainer::SessionOptions options;
    options.threads = threads;  // 0: the cores this rank has (Note [Threads follow the cores])
    // Joining waits for the other ranks: they may still be importing.
    py::gil_scoped_release release;
    g_session = std::make_unique<trainer::Session>(std::move(options));
  } else if (threads > 0 && threads != g_session->threads()) {
    throw ConfigError(fmt::format(
        "tnt.init(threads={}): this process already joined its job with {} compute thread(s); call tnt.init "
        "before anything else of tnt (get_rank, comm_world, a Model)",
        threads, g_session->threads()));
  }
  return *g_session;
}

}  // namespace tnt::python

PYBIND11_MODULE(_tnt, m) {
  using namespace tnt::python;
  m.doc() = "tnt's trainer and communicator (the tnt package's compiled part)";
  py::register_exception_translator(&translate);

  m.def(
      "init", [](int threads) { session(threads); }, py::arg("threads") = 0,
      "Joins this process's job (tnt-launch's TNT_* environment, mpirun's or srun's; alone: a job of one rank)");
  m.def("joined", [] { return g_session != nullptr; });
  m.def("rank", [] { return session().rank(); });
  m.def("size", [] { return session().size(); });
  m.def("threads", [] { return session().threads(); });
  m.def(
      "leave",
      [] {
        release_trainers();
        g_left = true;
        // The goodbye to the other ranks waits for them: without the GIL, so that nothing else of
        // this process is held up.
        py::gil_scoped_release release;
        g_session.reset();
      },
      "Leaves the job in order (at interpreter exit)");
  m.def(
      "abort",
      [](const std::string& reason) {
        // Note [One failure, every rank told]: the other ranks hear this rank's reason at once,
        // instead of waiting in a collective for it or seeing only its connections close.
        if (!g_session) return;
        py::gil_scoped_release release;
        g_session->communicator().abort(reason);
      },
      py::arg("reason"), "Ends the job on every rank, naming this one and the reason");
  m.def(
      "exit_now",
      [](int status) {
        // After a failure peers may be gone: skip the goodbye and every destructor, as tnt-train does.
        tnt::exit_now(status);
      },
      py::arg("status"));
  m.def("log_info", [](const std::string& text) { spdlog::info("{}", text); });
  m.def("log_warning", [](const std::string& text) { spdlog::warn("{}", text); });

  bind_comm(m);
  bind_sources(m);
  bind_trainer(m);
}
