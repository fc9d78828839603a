// tnt.comm_world(): the session's communicator on NumPy arrays, for Python HPC code (as
// mpi4py's buffer methods). In-place operations need the array's own memory: writable and
// C-contiguous, else the call is refused naming what is wrong (a copy would be silently lost).
#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <string>

#include "bindings.h"
#include "tnt/collectives/communicator.h"

namespace py = pybind11;

namespace tnt::python {
namespace {

DataType data_type_of(const py::array& a, const char* call) {
  if (holds<float>(a)) return DataType::float32;
  if (holds<double>(a)) return DataType::float64;
  if (holds<std::int32_t>(a)) return DataType::int32;
  if (holds<std::int64_t>(a)) return DataType::int64;
  const auto dtype = a.dtype();
  throw py::type_error(
      fmt::format("comm.{}: arrays of dtype {} cannot be reduced; use float32, float64, int32 or int64", call,
                  py::str(static_cast<py::handle>(dtype)).cast<std::string>()));
}

ReduceOp reduce_op_of(const std::string& op) {
  if (op == "sum") return ReduceOp::sum;
  if (op == "avg" || op == "mean") return ReduceOp::avg;
  if (op == "min") return ReduceOp::min;
  if (op == "max") return ReduceOp::max;
  throw py::value_error(fmt::format("comm.allreduce: op '{}': expected sum, avg, min or max", op));
}

// The array's own memory, which an in-place collective writes.
void* writable_buffer(py::array& a, const char* call) {
  if (!(a.flags() & py::array::c_style)) {
    throw py::value_error(fmt::format(
        "comm.{}: the array is not C-contiguous (a view with strides); pass numpy.ascontiguousarray(a) and use "
        "what comes back",
        call));
  }
  if (!a.writeable()) throw py::value_error(fmt::format("comm.{}: the array is read-only", call));
  return a.mutable_data();
}

// Looks the communicator up on every call: it ends with the session (tnt._tnt.leave).
class Comm {
 public:
  int rank() const { return c().rank(); }
  int size() const { return c().size(); }

  py::array allreduce(py::array a, const std::string& op) {
    const auto type = data_type_of(a, "allreduce");
    const auto reduce = reduce_op_of(op);
    void* data = writable_buffer(a, "allreduce");
    const auto count = static_cast<std::size_t>(a.size());
    py::gil_scoped_release release;
    c().allreduce(data, count, type, reduce);
    return a;
  }

  py::array broadcast(py::array a, int root) {
    check_root(root);
    void* data = writable_buffer(a, "broadcast");
    const auto bytes = static_cast<std::size_t>(a.nbytes());
    py::gil_scoped_release release;
    c().broadcast(data, bytes, root);
    return a;
  }

  // Every rank's array, stacked in rank order: shape (size,) + a.shape. Arrays of other
  // shapes or dtypes on other ranks are the caller's error (as in MPI); sizes are not checked.
  py::array allgather(const py::array& a) {
    const auto send = py::array::ensure(a, py::array::c_style);
    std::vector<py::ssize_t> shape{c().size()};
    for (py::ssize_t d = 0; d < send.ndim(); ++d) shape.push_back(send.shape(d));
    py::array out(send.dtype(), shape);
    const auto bytes = static_cast<std::size_t>(send.nbytes());
    const void* from = send.data();
    void* to = out.mutable_data();
    {
      py::gil_scoped_release release;
      c().allgather(from, to, bytes);
    }
    return out;
  }

  void barrier() {
    py::gil_scoped_release release;
    c().barrier();
  }

 private:
  void check_root(int root) const {
    if (root < 0 || root >= c().size()) {
      throw py::value_error(fmt::format("comm.broadcast: root {} is not a rank of this job of {}", root, c().size()));
    }
  }
  static Communicator& c() { return session().communicator(); }
};

}  // namespace

void bind_comm(py::module_& m) {
  py::class_<Comm>(m, "Communicator", "The job's communicator (tnt.comm_world()); collectives on NumPy arrays")
      .def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def("allreduce", &Comm::allreduce, py::arg("array"), py::arg("op") = "sum",
           "In place: the array becomes the element-wise reduction over all ranks (sum, avg, min or max); "
           "returns it")
      .def("broadcast", &Comm::broadcast, py::arg("array"), py::arg("root") = 0,
           "In place: root's array reaches every rank's; returns it")
      .def("allgather", &Comm::allgather, py::arg("array"), "Every rank's array in rank order, stacked on a new axis 0")
      .def("barrier", &Comm::barrier, "Returns once every rank has called it");
  m.def(
      "comm_world",
      [] {
        session();  // joins the job now, as mpi4py's COMM_WORLD is there on import
        return Comm();
      },
      "The communicator of this process's job (joined on first use), which the trainer shares");
}

}  // namespace tnt::python
