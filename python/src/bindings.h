#pragma once
// Pieces of the tnt._tnt extension module, each bound by its own file (python/README.md).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "tnt/trainer/trainer.h"

namespace tnt::python {

// The process's one Session (and with it its one Communicator), joined on first use: the
// trainer and tnt.comm_world() share it, as every rank must issue the same collectives in one
// order. `threads` 0: join with 1 compute thread unless already joined. After the process has
// left its job (tnt._tnt.leave, at exit) it throws tnt::Error.
trainer::Session& session(int threads = 0);

// The trainers of tnt.Model objects still alive let go of the session (at interpreter exit, before
// it is closed: Python may destroy those objects only after). Later calls on them raise.
void release_trainers();

// Whether the array's elements are T's (NumPy's equivalence: byte order and aliases such as
// longlong for int64 included, which comparing dtype objects would miss).
template <class T>
bool holds(const pybind11::array& a) {
  return pybind11::isinstance<pybind11::array_t<T>>(a);
}

void bind_comm(pybind11::module_& m);
void bind_sources(pybind11::module_& m);
void bind_trainer(pybind11::module_& m);

}  // namespace tnt::python
