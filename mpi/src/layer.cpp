#include "layer.h"

#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <new>

#include "tnt/core/error.h"
#include "tnt/core/exit.h"

namespace tnt::mpi {

namespace {

constexpr MPI_Comm kFirstComm = MPI_COMM_WORLD;
constexpr MPI_Datatype kFirstType = MPI_CHAR;
constexpr MPI_Op kFirstOp = MPI_MAX;

// Note [Exit after a failure]: MPI's default is that an error ends the job. tnt tells every rank
// of a failure within moments; a rank that is computing outside MPI's calls then ends this long
// after, as tnt-train's ranks do, instead of running on until its next call.
constexpr std::chrono::milliseconds kExitAfterFailure{3000};

// Indexed by handle - MPI_CHAR: the order of mpi.h.
const std::array<TypeInfo, 19> kTypes{{
    {MPI_CHAR, "MPI_CHAR", 1, std::nullopt, false},
    {MPI_BYTE, "MPI_BYTE", 1, DataType::uint8, true},
    {MPI_INT, "MPI_INT", sizeof(int), DataType::int32, false},
    {MPI_UNSIGNED, "MPI_UNSIGNED", sizeof(unsigned), DataType::uint32, false},
    {MPI_LONG, "MPI_LONG", sizeof(long), DataType::int64, false},
    {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", sizeof(unsigned long), DataType::uint64, false},
    {MPI_LONG_LONG, "MPI_LONG_LONG", sizeof(long long), DataType::int64, false},
    {MPI_FLOAT, "MPI_FLOAT", sizeof(float), DataType::float32, false},
    {MPI_DOUBLE, "MPI_DOUBLE", sizeof(double), DataType::float64, false},
    {MPI_INT8_T, "MPI_INT8_T", 1, DataType::int8, false},
    {MPI_INT16_T, "MPI_INT16_T", 2, DataType::int16, false},
    {MPI_INT32_T, "MPI_INT32_T", 4, DataType::int32, false},
    {MPI_INT64_T, "MPI_INT64_T", 8, DataType::int64, false},
    {MPI_UINT8_T, "MPI_UINT8_T", 1, DataType::uint8, false},
    {MPI_UINT16_T, "MPI_UINT16_T", 2, DataType::uint16, false},
    {MPI_UINT32_T, "MPI_UINT32_T", 4, DataType::uint32, false},
    {MPI_UINT64_T, "MPI_UINT64_T", 8, DataType::uint64, false},
    {MPI_DOUBLE_INT, "MPI_DOUBLE_INT", size_of(DataType::float64_int32), DataType::float64_int32, false},
    {MPI_2INT, "MPI_2INT", size_of(DataType::int32_int32), DataType::int32_int32, false},
}};
static_assert(sizeof(int) == 4 && sizeof(long) == 8 && sizeof(long long) == 8, "an LP64 platform");
static_assert(size_of(DataType::float64_int32) == 16 && size_of(DataType::int32_int32) == 8,
              "MPI_DOUBLE_INT and MPI_2INT are C's struct { double; int; } and struct { int; int; }");

// Indexed by handle - MPI_MAX: the order of mpi.h (9 and 10 are not MPI_Ops of the subset).
const std::array<OpInfo, 12> kOps{{
    {MPI_MAX, "MPI_MAX", ReduceOp::max},
    {MPI_MIN, "MPI_MIN", ReduceOp::min},
    {MPI_SUM, "MPI_SUM", ReduceOp::sum},
    {MPI_PROD, "MPI_PROD", ReduceOp::prod},
    {MPI_LAND, "MPI_LAND", ReduceOp::logical_and},
    {MPI_BAND, "MPI_BAND", ReduceOp::bit_and},
    {MPI_LOR, "MPI_LOR", ReduceOp::logical_or},
    {MPI_BOR, "MPI_BOR", ReduceOp::bit_or},
    {MPI_OP_NULL, nullptr, std::nullopt},
    {MPI_OP_NULL, nullptr, std::nullopt},
    {MPI_MINLOC, "MPI_MINLOC", ReduceOp::min_loc},
    {MPI_MAXLOC, "MPI_MAXLOC", ReduceOp::max_loc},
}};

const char* class_text(int error_class) {
  switch (error_class) {
    case MPI_SUCCESS: return "MPI_SUCCESS: no error";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER: invalid buffer pointer";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT: invalid count argument";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE: invalid or unsupported datatype";
    case MPI_ERR_TAG: return "MPI_ERR_TAG: invalid tag";
    case MPI_ERR_COMM: return "MPI_ERR_COMM: invalid communicator";
    case MPI_ERR_RANK: return "MPI_ERR_RANK: invalid rank";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST: invalid request";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT: invalid root";
    case MPI_ERR_GROUP: return "MPI_ERR_GROUP: invalid group";
    case MPI_ERR_OP: return "MPI_ERR_OP: invalid or unsupported reduction operation";
    case MPI_ERR_TOPOLOGY: return "MPI_ERR_TOPOLOGY: invalid topology";
    case MPI_ERR_DIMS: return "MPI_ERR_DIMS: invalid dimension argument";
    case MPI_ERR_ARG: return "MPI_ERR_ARG: invalid argument";
    case MPI_ERR_UNKNOWN: return "MPI_ERR_UNKNOWN: unknown error";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE: message truncated";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER: the job failed or the call cannot be done";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN: internal error";
    case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS: error code is in status";
    case MPI_ERR_PENDING: return "MPI_ERR_PENDING: pending request";
    case MPI_ERR_UNSUPPORTED_OPERATION: return "MPI_ERR_UNSUPPORTED_OPERATION: not supported by tnt's MPI layer";
    default: return nullptr;
  }
}

// An error code is its class in the low 7 bits and a sequence number above them, which finds the
// message of the failure that returned it in a ring of recent ones (as MPICH's codes do).
constexpr int kClassBits = 7;
constexpr int kRingSize = 64;
struct RecordedError {
  int code = 0;
  std::string message;
};

struct State {
  bool initialized = false;
  bool finalized = false;
  std::vector<CommEntry> comms;                           // indexed by handle - MPI_COMM_WORLD
  std::vector<std::unique_ptr<PendingRequest>> requests;  // indexed by handle - 1
  std::vector<int> free_slots;
  std::vector<std::unique_ptr<PendingRequest>> detached;  // freed by MPI_Request_free while in flight
  std::array<RecordedError, kRingSize> errors;
  int next_sequence = 1;
  // MPI_COMM_WORLD's handler outlives the world, for calls after MPI_Finalize.
  MPI_Errhandler world_errhandler = MPI_ERRORS_ARE_FATAL;
};

// Never destroyed: a process that exits without MPI_Finalize must not run the Communicator's
// goodbye from a static destructor; its peers see it lost and say so.
State& state() {
  static State* const instance = new State;
  return *instance;
}

int world_rank() {
  auto& s = state();
  if (s.comms.empty() || !s.comms[0].comm) return -1;
  return s.comms[0].comm->rank();
}

int record(int error_class, std::string message) {
  auto& s = state();
  const int sequence = s.next_sequence;
  s.next_sequence = s.next_sequence >= (MPI_ERR_LASTCODE >> kClassBits) ? 1 : s.next_sequence + 1;
  const int code = (sequence << kClassBits) | error_class;
  s.errors[static_cast<std::size_t>(sequence % kRingSize)] = {code, std::move(message)};
  return code;
}

MPI_Errhandler handler_of(MPI_Comm comm) {
  auto& s = state();
  const auto index = static_cast<std::size_t>(comm - kFirstComm);
  if (comm >= kFirstComm && index < s.comms.size() && s.comms[index].comm) return s.comms[index].errhandler;
  // A call without a valid communicator reports to MPI_COMM_WORLD's handler.
  if (!s.comms.empty() && s.comms[0].comm) return s.comms[0].errhandler;
  return s.world_errhandler;
}

[[noreturn]] void end_job(const std::string& message, bool job_failed_already) {
  std::fprintf(stderr, "tnt MPI: rank %d: %s (MPI_ERRORS_ARE_FATAL: the job ends)\n", world_rank(), message.c_str());
  auto& s = state();
  if (!job_failed_already && !s.comms.empty() && s.comms[0].comm) {
    try {
      s.comms[0].comm->abort(message);
    } catch (...) {  // the job is ending whatever abort() met
    }
  }
  exit_now(1);
}

}  // namespace

void check_active() {
  const auto& s = state();
  if (!s.initialized) throw CallError{MPI_ERR_OTHER, "called before MPI_Init"};
  if (s.finalized) throw CallError{MPI_ERR_OTHER, "called after MPI_Finalize"};
}

int fail_current(const char* function, MPI_Comm comm) noexcept {
  int error_class = MPI_ERR_INTERN;
  std::string message;
  bool job_failed = false;
  try {
    throw;
  } catch (const CallError& e) {
    error_class = e.error_class;
    message = e.message;
  } catch (const JobError& e) {
    error_class = MPI_ERR_OTHER;
    message = e.what();
    job_failed = true;
  } catch (const ConfigError& e) {
    error_class = MPI_ERR_ARG;
    message = e.what();
  } catch (const Error& e) {
    error_class = MPI_ERR_OTHER;
    message = e.what();
  } catch (const std::bad_alloc&) {
    error_class = MPI_ERR_OTHER;
    message = "out of memory";
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    error_class = MPI_ERR_UNKNOWN;
    message = "an exception of unknown type";
  }
  try {
    std::string text = std::string(function) + ": " + message;
    if (handler_of(comm) != MPI_ERRORS_RETURN) end_job(text, job_failed);
    return record(error_class, std::move(text));
  } catch (...) {  // out of memory for the message itself
    return error_class;
  }
}

CommEntry& comm_entry(MPI_Comm comm, const char* argument) {
  auto& s = state();
  const auto index = static_cast<std::size_t>(comm - kFirstComm);
  if (comm == MPI_COMM_NULL) throw CallError{MPI_ERR_COMM, fmt::format("argument {} is MPI_COMM_NULL", argument)};
  if (comm < kFirstComm || index >= s.comms.size()) {
    throw CallError{MPI_ERR_COMM,
                    fmt::format("argument {}: {} (0x{:x}) is not a communicator handle", argument, comm, comm)};
  }
  if (!s.comms[index].comm) {
    throw CallError{MPI_ERR_COMM, fmt::format("argument {}: communicator 0x{:x} was freed", argument, comm)};
  }
  return s.comms[index];
}

MPI_Comm add_comm(std::shared_ptr<Communicator> comm, MPI_Errhandler errhandler, std::vector<int> world_ranks) {
  auto& s = state();
  s.comms.push_back({std::move(comm), errhandler, std::move(world_ranks)});
  return kFirstComm + static_cast<MPI_Comm>(s.comms.size() - 1);
}

void free_comm(MPI_Comm comm) {
  // The Communicator goes once no request of it is pending (requests hold it too).
  comm_entry(comm).comm.reset();
}

Communicator& communicator(MPI_Comm comm, const char* argument) { return *comm_entry(comm, argument).comm; }

const TypeInfo& datatype(MPI_Datatype type, const char* argument) {
  const auto index = static_cast<std::size_t>(type - kFirstType);
  if (type >= kFirstType && index < kTypes.size()) return kTypes[index];
  if (type == MPI_DATATYPE_NULL)
    throw CallError{MPI_ERR_TYPE, fmt::format("argument {} is MPI_DATATYPE_NULL", argument)};
  throw CallError{MPI_ERR_TYPE, fmt::format("argument {}: {} (0x{:x}) is not a datatype that tnt's MPI layer provides "
                                            "(only the basic datatypes are: no derived ones)",
                                            argument, type, type)};
}

const OpInfo& op_info(MPI_Op op, const char* argument) {
  const auto index = static_cast<std::size_t>(op - kFirstOp);
  if (op >= kFirstOp && index < kOps.size() && kOps[index].name) return kOps[index];
  if (op == MPI_OP_NULL) throw CallError{MPI_ERR_OP, fmt::format("argument {} is MPI_OP_NULL", argument)};
  throw CallError{MPI_ERR_OP,
                  fmt::format("argument {}: {} (0x{:x}) is not an op that tnt's MPI layer provides (only the "
                              "predefined ones are: no user ops)",
                              argument, op, op)};
}

Reduction reduction(const TypeInfo& type, const OpInfo& op) {
  if (!op.reduce_as) {
    throw CallError{MPI_ERR_OP, fmt::format("argument op: {} is not provided yet (tnt's Communicator has no such "
                                            "reduction yet)",
                                            op.name)};
  }
  if (!type.reduce_as) {
    throw CallError{MPI_ERR_TYPE, fmt::format("argument datatype: MPI reduces no {}", type.name)};
  }
  // MPI: MPI_BYTE takes the bitwise ops only; the Communicator's uint8 would take any.
  const bool bitwise = op.handle == MPI_BAND || op.handle == MPI_BOR;
  if (!supports(*type.reduce_as, *op.reduce_as) || (type.bitwise_only && !bitwise)) {
    throw CallError{MPI_ERR_OP, fmt::format("arguments op and datatype: MPI defines no {} on {}", op.name, type.name)};
  }
  return {*type.reduce_as, *op.reduce_as};
}

std::size_t count_bytes(int count, const TypeInfo& type, const char* argument) {
  if (count < 0) throw CallError{MPI_ERR_COUNT, fmt::format("argument {} is negative ({})", argument, count)};
  return static_cast<std::size_t>(count) * type.size;
}

void check_buffer(const void* buffer, std::size_t bytes, const char* argument) {
  if (!buffer && bytes) {
    throw CallError{MPI_ERR_BUFFER, fmt::format("argument {} is a null pointer for {} bytes", argument, bytes)};
  }
}

void check_root(int root, int size) {
  if (root < 0 || root >= size) {
    throw CallError{MPI_ERR_ROOT,
                    fmt::format("argument root: {} is not a rank of the communicator (size {})", root, size)};
  }
}

MPI_Request add_request(std::unique_ptr<PendingRequest> pending) {
  auto& s = state();
  pending->owner = comm_entry(pending->comm).comm;
  // Requests given up by MPI_Request_free end here once their operations have.
  std::erase_if(s.detached, [](const auto& p) { return !p->request.valid() || p->request.test(); });
  if (s.free_slots.empty()) {
    s.requests.push_back(std::move(pending));
    return static_cast<MPI_Request>(s.requests.size());
  }
  const int slot = s.free_slots.back();
  s.free_slots.pop_back();
  s.requests[static_cast<std::size_t>(slot)] = std::move(pending);
  return slot + 1;
}

namespace {
std::unique_ptr<PendingRequest>& slot_of(MPI_Request request, const char* argument) {
  auto& s = state();
  const auto index = static_cast<std::size_t>(request - 1);
  if (request < 1 || index >= s.requests.size() || !s.requests[index]) {
    throw CallError{
        MPI_ERR_REQUEST,
        fmt::format("argument {}: {} is not a request in flight (completed or freed already?)", argument, request)};
  }
  return s.requests[index];
}

std::unique_ptr<PendingRequest> release_slot(MPI_Request* request) {
  auto owned = std::move(slot_of(*request, "request"));
  state().free_slots.push_back(*request - 1);
  *request = MPI_REQUEST_NULL;
  return owned;
}
}  // namespace

void set_empty(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
  status->tnt_bytes = 0;
}

bool finished(MPI_Request request, const char* argument) {
  if (request == MPI_REQUEST_NULL) return true;
  const auto& pending = *slot_of(request, argument);
  return !pending.request.valid() || pending.request.test();
}

void set_status(MPI_Status* status, const MessageStatus& message) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = message.source;
  status->MPI_TAG = message.tag;
  status->MPI_ERROR = MPI_SUCCESS;
  status->tnt_bytes = message.bytes;
}

void set_proc_null(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_PROC_NULL;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
  status->tnt_bytes = 0;
}

void wait_receive(const Request& request, MPI_Status* status) {
  try {
    request.wait();
  } catch (const TruncationError& e) {
    fail_truncated(status, request.status(), e.what());
  }
  set_status(status, request.status());
}

void fail_truncated(MPI_Status* status, const MessageStatus& message, const char* what) {
  // A message larger than the receive, which keeps what fits.
  set_status(status, message);
  if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = MPI_ERR_TRUNCATE;
  throw CallError{MPI_ERR_TRUNCATE, what};
}

bool complete(MPI_Request* request, MPI_Status* status, bool block) {
  if (!request) throw CallError{MPI_ERR_REQUEST, "argument request is a null pointer"};
  if (*request == MPI_REQUEST_NULL) {
    set_empty(status);
    return true;
  }
  if (!block && !finished(*request)) return false;
  auto pending = release_slot(request);
  if (pending->preset) {
    if (status != MPI_STATUS_IGNORE) *status = *pending->preset;
    return true;
  }
  if (pending->receive) {
    wait_receive(pending->request, status);
    return true;
  }
  if (pending->request.valid()) pending->request.wait();  // throws the operation's failure
  if (pending->finish) pending->finish();
  if (pending->point_to_point) {
    set_status(status, pending->request.status());
  } else {
    set_empty(status);
  }
  return true;
}

Request tnt_request(MPI_Request request, const char* argument) {
  if (request == MPI_REQUEST_NULL) return {};
  return slot_of(request, argument)->request;
}

void free_request(MPI_Request* request) {
  if (!request) throw CallError{MPI_ERR_REQUEST, "argument request is a null pointer"};
  if (*request == MPI_REQUEST_NULL) throw CallError{MPI_ERR_REQUEST, "argument request is MPI_REQUEST_NULL"};
  auto pending = release_slot(request);
  if (pending->request.valid() && !pending->request.test()) state().detached.push_back(std::move(pending));
}

bool initialized() { return state().initialized; }
bool finalized() { return state().finalized; }

int initialize(int required_thread_level) {
  auto& s = state();
  if (s.initialized) throw CallError{MPI_ERR_OTHER, "MPI is initialised already (once per process)"};
  CommunicatorOptions world_options;
  world_options.exit_after_failure = kExitAfterFailure;
  auto world = std::make_shared<Communicator>(std::move(world_options));
  CommunicatorOptions self_options;
  self_options.environment = JobEnvironment{};  // a job of one process: no network
  auto self = std::make_shared<Communicator>(std::move(self_options));
  std::vector<int> world_ranks(static_cast<std::size_t>(world->size()));
  for (std::size_t r = 0; r < world_ranks.size(); ++r) world_ranks[r] = static_cast<int>(r);
  const int rank = world->rank();
  s.comms.push_back({std::move(world), MPI_ERRORS_ARE_FATAL, std::move(world_ranks)});
  s.comms.push_back({std::move(self), MPI_ERRORS_ARE_FATAL, {rank}});
  s.initialized = true;
  // Communicator: "calls may come from any thread, one at a time".
  return std::min(required_thread_level, MPI_THREAD_SERIALIZED);
}

void finalize() {
  auto& s = state();
  s.world_errhandler = s.comms[0].errhandler;
  s.finalized = true;
  auto world = s.comms[0].comm;
  // The communicators made from the world go first (a pending request keeps its own until it
  // ends), the world last. Pending requests hold buffers the operations may still write: they
  // are dropped once finish() has waited for every operation.
  for (std::size_t i = s.comms.size(); i-- > 1;) s.comms[i].comm.reset();
  world->finish();
  s.requests.clear();
  s.detached.clear();
  s.comms.clear();
}

void abort_job(MPI_Comm comm, int errorcode) {
  const std::string reason = fmt::format("MPI_Abort(comm 0x{:x}, errorcode {}) called", comm, errorcode);
  std::fprintf(stderr, "tnt MPI: rank %d: %s: the job ends\n", world_rank(), reason.c_str());
  auto& s = state();
  if (s.initialized && !s.finalized && s.comms[0].comm) {
    try {
      s.comms[0].comm->abort(reason);
    } catch (...) {  // ending anyway
    }
  }
  // An exit status is 8 bits; an error code that would read as success still ends with a failure.
  const int status = errorcode & 0xff;
  exit_now(status == 0 ? 1 : status);
}

std::string error_string(int code) {
  if (const char* text = class_text(code)) return text;
  if (code <= 0) throw CallError{MPI_ERR_ARG, fmt::format("argument errorcode: {} is not an MPI error code", code)};
  const auto& s = state();
  const int sequence = code >> kClassBits;
  const auto& recorded = s.errors[static_cast<std::size_t>(sequence % kRingSize)];
  const char* of_class = class_text(code & ((1 << kClassBits) - 1));
  if (recorded.code == code) return fmt::format("{} ({})", recorded.message, of_class ? of_class : "?");
  if (of_class) return fmt::format("{} (the details of this error are no longer kept)", of_class);
  throw CallError{MPI_ERR_ARG, fmt::format("argument errorcode: {} is not an MPI error code", code)};
}

int error_class_of(int code) {
  const int error_class = code & ((1 << kClassBits) - 1);
  if (code < 0 || !class_text(error_class)) {
    throw CallError{MPI_ERR_ARG, fmt::format("argument errorcode: {} is not an MPI error code", code)};
  }
  return error_class;
}

}  // namespace tnt::mpi
