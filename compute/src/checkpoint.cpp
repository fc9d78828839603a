#include "tnt/compute/checkpoint.h"
#include "tnt/core/error.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <kj/exception.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <vector>

#include "checkpoint.capnp.h"

namespace tnt::compute {

static_assert(std::endian::native == std::endian::little, "checkpoints store little-endian floats");

namespace {

constexpr char kMagic[8] = {'T', 'N', 'T', 'C', 'K', 'P', 'T', '\0'};
constexpr uint32_t kFormatVersion = 1;  // the 32-byte header
constexpr uint32_t kSchemaVersion = 1;  // checkpoint.capnp's meaning
constexpr size_t kHeaderBytes = 32;

struct Header {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t payload_bytes;
  uint64_t payload_hash;
};
static_assert(sizeof(Header) == kHeaderBytes);

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    h = (h ^ data[i]) * 0x100000001b3ULL;
  }
  return h;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw DataError("checkpoint '" + path + "': " + what + ": " + std::strerror(errno));
}

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw DataError("checkpoint '" + path + "' is not valid: " + what);
}

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      io_error("write failed", path);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void put_array(schema::Array::Builder out, const NamedArray& a) {
  out.setName(a.name);
  auto shape = out.initShape(static_cast<unsigned>(a.shape.size()));
  for (size_t i = 0; i < a.shape.size(); ++i) {
    shape.set(static_cast<unsigned>(i), a.shape[i]);
  }
  auto bytes = out.initValues(static_cast<unsigned>(a.values.size() * sizeof(float)));
  // An empty vector's data() may be null, which memcpy may not be given even for 0 bytes.
  if (!a.values.empty()) std::memcpy(bytes.begin(), a.values.data(), a.values.size() * sizeof(float));
}

NamedArray get_array(schema::Array::Reader in, const std::string& path) {
  NamedArray a;
  a.name = in.getName();
  int64_t count = 1;
  for (int64_t d : in.getShape()) {
    if (d < 0 || d > (int64_t{1} << 40) || (d > 0 && count > (int64_t{1} << 40) / d)) {
      bad_file(path, "array '" + a.name + "' has an impossible shape");
    }
    a.shape.push_back(d);
    count *= d;
  }
  auto bytes = in.getValues();
  if (bytes.size() != static_cast<size_t>(count) * sizeof(float)) {
    bad_file(path, "array '" + a.name + "' of shape " + to_string(a.shape) + " holds " + std::to_string(bytes.size()) +
                       " bytes, expected " + std::to_string(count * 4));
  }
  a.values.resize(static_cast<size_t>(count));
  // An empty array (a dimension of 0) has no storage: memcpy may not be given its null pointer.
  if (bytes.size() > 0) std::memcpy(a.values.data(), bytes.begin(), bytes.size());
  return a;
}

NamedArray copy_out(const std::string& name, const Shape& shape, const float* data) {
  return {name, shape, std::vector<float>(data, data + element_count(shape))};
}

}  // namespace

const CheckpointEntry* Checkpoint::find(const std::string& key) const {
  for (const auto& e : extra) {
    if (e.key == key) {
      return &e;
    }
  }
  return nullptr;
}

Checkpoint capture(const Model& model, const Optimizer* optimizer, CheckpointKind kind) {
  Checkpoint c;
  c.kind = kind;
  c.model = model.spec();
  if (kind == CheckpointKind::architecture) {
    return c;
  }
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    c.parameters.push_back(copy_out(model.parameter(i).name, model.parameter(i).shape, model.weights(i)));
  }
  for (size_t i = 0; i < model.state_count(); ++i) {
    c.states.push_back(copy_out(model.state(i).name, {model.state(i).size}, model.state_data(i)));
  }
  c.training_passes = model.training_passes();
  if (kind == CheckpointKind::full && optimizer != nullptr) {
    c.optimizer_options = optimizer->options();
    c.optimizer_state = optimizer->state();
  }
  return c;
}

namespace {

void put_entries(capnp::List<schema::Entry>::Builder out, const std::vector<CheckpointEntry>& entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    auto e = out[static_cast<unsigned>(i)];
    e.setKey(entries[i].key);
    if (const auto* integer = std::get_if<int64_t>(&entries[i].value)) {
      e.setInteger(*integer);
    } else if (const auto* real = std::get_if<double>(&entries[i].value)) {
      e.setReal(*real);
    } else {
      const auto& b = std::get<std::vector<uint8_t>>(entries[i].value);
      e.setBytes(kj::arrayPtr(b.data(), b.size()));
    }
  }
}

// The Cap'n Proto message of a checkpoint, without the header.
void build_message(schema::Checkpoint::Builder root, const Checkpoint& c) {
  root.setSchemaVersion(kSchemaVersion);
  using Kind = schema::Checkpoint::Kind;
  root.setKind(c.kind == CheckpointKind::full           ? Kind::FULL
               : c.kind == CheckpointKind::architecture ? Kind::ARCHITECTURE
                                                        : Kind::WEIGHTS);
  root.setModelToml(to_toml(c.model));
  auto params = root.initParameters(static_cast<unsigned>(c.parameters.size()));
  for (size_t i = 0; i < c.parameters.size(); ++i) {
    put_array(params[static_cast<unsigned>(i)], c.parameters[i]);
  }
  auto states = root.initStates(static_cast<unsigned>(c.states.size()));
  for (size_t i = 0; i < c.states.size(); ++i) {
    put_array(states[static_cast<unsigned>(i)], c.states[i]);
  }
  root.setHasOptimizer(c.optimizer_options.has_value());
  if (c.optimizer_options) {
    const auto& o = *c.optimizer_options;
    auto out = root.initOptimizerOptions();
    out.setKind(o.kind);
    out.setMomentum(o.momentum);
    out.setNesterov(o.nesterov);
    out.setWeightDecay(o.weight_decay);
    out.setBeta1(o.beta1);
    out.setBeta2(o.beta2);
    out.setEpsilon(o.epsilon);
    out.setRho(o.rho);
    out.setInitialAccumulator(o.initial_accumulator);
    root.setOptimizerSteps(c.optimizer_state.steps);
    auto slots = root.initOptimizerSlots(static_cast<unsigned>(c.optimizer_state.slots.size()));
    for (size_t i = 0; i < c.optimizer_state.slots.size(); ++i) {
      const auto& s = c.optimizer_state.slots[i];
      put_array(slots[static_cast<unsigned>(i)], {s.name, {static_cast<int64_t>(s.values.size())}, s.values});
    }
  }
  root.setEpoch(c.epoch);
  root.setStep(c.step);
  root.setTrainingPasses(c.training_passes);
  put_entries(root.initExtra(static_cast<unsigned>(c.extra.size())), c.extra);
  auto callbacks = root.initCallbackStates(static_cast<unsigned>(c.callback_states.size()));
  for (size_t i = 0; i < c.callback_states.size(); ++i) {
    auto out = callbacks[static_cast<unsigned>(i)];
    out.setName(c.callback_states[i].name);
    put_entries(out.initEntries(static_cast<unsigned>(c.callback_states[i].entries.size())),
                c.callback_states[i].entries);
  }
}

// Atomic replace: write a sibling temporary, fsync it, rename over the target, fsync the
// folder so the rename itself is durable.
void write_atomically(const std::string& path, std::span<const std::byte> bytes) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    io_error("cannot create " + temp, path);
  }
  try {
    write_all(fd, bytes.data(), bytes.size(), path);
    if (::fsync(fd) != 0) {
      io_error("fsync failed", path);
    }
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    io_error("close failed", path);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    io_error("rename failed", path);
  }
  int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

// The whole file, or an error naming it.
std::vector<std::byte> read_whole_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    io_error("cannot open", path);
  }
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
    ::close(fd);
    io_error("cannot seek", path);
  }
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      ::close(fd);
      if (got == 0) {
        bad_file(path, "file ends early");
      }
      io_error("read failed", path);
    }
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  return bytes;
}

// Checks the header, length and checksum; returns the payload as aligned words.
kj::Array<capnp::word> checked_payload(std::span<const std::byte> bytes, const std::string& origin) {
  if (bytes.size() < kHeaderBytes) {
    bad_file(origin, "only " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  }
  Header header{};
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) {
    bad_file(origin, "not a tnt checkpoint (bad magic)");
  }
  if (header.format_version != kFormatVersion) {
    bad_file(origin, "format version " + std::to_string(header.format_version) + ", this build reads " +
                         std::to_string(kFormatVersion));
  }
  const uint64_t available = bytes.size() - kHeaderBytes;
  if (header.payload_bytes != available || available % sizeof(capnp::word) != 0) {
    bad_file(origin, "header announces " + std::to_string(header.payload_bytes) + " payload bytes, file holds " +
                         std::to_string(available) + " (truncated or extended?)");
  }
  // A copy: Cap'n Proto reads words, and the caller's bytes need not be aligned.
  auto words = kj::heapArray<capnp::word>(available / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data() + kHeaderBytes, available);
  if (fnv1a(words.asBytes().begin(), available) != header.payload_hash) {
    bad_file(origin, "checksum mismatch (corrupted)");
  }
  return words;
}

void read_optimizer(schema::Checkpoint::Reader root, Checkpoint& c, const std::string& origin) {
  auto o = root.getOptimizerOptions();
  c.optimizer_options = OptimizerOptions{.kind = o.getKind(),
                                         .momentum = o.getMomentum(),
                                         .nesterov = o.getNesterov(),
                                         .weight_decay = o.getWeightDecay(),
                                         .beta1 = o.getBeta1(),
                                         .beta2 = o.getBeta2(),
                                         .epsilon = o.getEpsilon(),
                                         .rho = o.getRho(),
                                         .initial_accumulator = o.getInitialAccumulator()};
  c.optimizer_state.kind = c.optimizer_options->kind;
  c.optimizer_state.steps = root.getOptimizerSteps();
  for (auto a : root.getOptimizerSlots()) {
    NamedArray s = get_array(a, origin);
    c.optimizer_state.slots.push_back({s.name, std::move(s.values)});
  }
}

// `where` names the list in errors ("extra entry", "callback 'EarlyStopping' entry").
std::vector<CheckpointEntry> get_entries(capnp::List<schema::Entry>::Reader in, const std::string& origin,
                                         const std::string& where) {
  std::vector<CheckpointEntry> entries;
  for (auto e : in) {
    CheckpointEntry entry{e.getKey(), int64_t{0}};
    if (e.isInteger()) {
      entry.value = e.getInteger();
    } else if (e.isReal()) {
      entry.value = e.getReal();
    } else if (e.isBytes()) {
      auto b = e.getBytes();
      entry.value = std::vector<uint8_t>(b.begin(), b.end());
    } else {
      bad_file(origin, where + " '" + entry.key + "' has an unknown value type");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

void read_callback_states(schema::Checkpoint::Reader root, Checkpoint& c, const std::string& origin) {
  for (auto state : root.getCallbackStates()) {
    std::string name = state.getName();
    for (const auto& seen : c.callback_states) {
      if (seen.name == name) bad_file(origin, "two states of callback '" + name + "'");
    }
    auto entries = get_entries(state.getEntries(), origin, "callback '" + name + "' entry");
    c.callback_states.push_back({std::move(name), std::move(entries)});
  }
}

// Throws kj::Exception for a malformed message, DataError for a bad value.
Checkpoint read_message(schema::Checkpoint::Reader root, const std::string& origin) {
  if (root.getSchemaVersion() != kSchemaVersion) {
    bad_file(origin, "schema version " + std::to_string(root.getSchemaVersion()) + ", this build reads " +
                         std::to_string(kSchemaVersion));
  }
  Checkpoint c;
  switch (root.getKind()) {
    case schema::Checkpoint::Kind::FULL: c.kind = CheckpointKind::full; break;
    case schema::Checkpoint::Kind::ARCHITECTURE: c.kind = CheckpointKind::architecture; break;
    case schema::Checkpoint::Kind::WEIGHTS: c.kind = CheckpointKind::weights; break;
    default: bad_file(origin, "unknown checkpoint kind");
  }
  try {
    c.model = parse_model_toml(root.getModelToml(), origin + " (model)");
  } catch (const ConfigError& e) {
    bad_file(origin, e.what());
  }
  for (auto a : root.getParameters()) {
    c.parameters.push_back(get_array(a, origin));
  }
  for (auto a : root.getStates()) {
    c.states.push_back(get_array(a, origin));
  }
  if (root.getHasOptimizer()) {
    read_optimizer(root, c, origin);
  }
  c.epoch = root.getEpoch();
  c.step = root.getStep();
  c.training_passes = root.getTrainingPasses();
  c.extra = get_entries(root.getExtra(), origin, "extra entry");
  read_callback_states(root, c, origin);
  return c;
}

}  // namespace

std::vector<std::byte> serialize_checkpoint(const Checkpoint& c) {
  capnp::MallocMessageBuilder message;
  build_message(message.initRoot<schema::Checkpoint>(), c);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const kj::byte> payload = words.asBytes();
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.format_version = kFormatVersion;
  header.payload_bytes = payload.size();
  header.payload_hash = fnv1a(payload.begin(), payload.size());
  const auto* head = reinterpret_cast<const std::byte*>(&header);
  const auto* body = reinterpret_cast<const std::byte*>(payload.begin());
  std::vector<std::byte> bytes(head, head + sizeof(header));
  bytes.resize(sizeof(header) + payload.size());
  std::copy(body, body + payload.size(), bytes.begin() + sizeof(header));
  return bytes;
}

void save_checkpoint(const std::string& path, const Checkpoint& c) { write_atomically(path, serialize_checkpoint(c)); }

Checkpoint parse_checkpoint(std::span<const std::byte> bytes, const std::string& origin) {
  const auto words = checked_payload(bytes, origin);
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() + 1024;
    options.nestingLimit = 16;
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    return read_message(reader.getRoot<schema::Checkpoint>(), origin);
  } catch (const kj::Exception& e) {
    bad_file(origin, std::string("malformed message: ") + e.getDescription().cStr());
  }
}

Checkpoint load_checkpoint(const std::string& path) { return parse_checkpoint(read_whole_file(path), path); }

void restore_weights(Model& model, const Checkpoint& c) {
  if (c.kind == CheckpointKind::architecture) {
    throw ConfigError("checkpoint holds the architecture only, no weights");
  }
  if (c.parameters.size() != model.parameter_count() || c.states.size() != model.state_count()) {
    throw ConfigError("checkpoint has " + std::to_string(c.parameters.size()) + " parameters and " +
                      std::to_string(c.states.size()) + " statistics, model '" + model.spec().name + "' has " +
                      std::to_string(model.parameter_count()) + " and " + std::to_string(model.state_count()));
  }
  for (size_t i = 0; i < c.parameters.size(); ++i) {
    const auto& p = model.parameter(i);
    if (c.parameters[i].name != p.name || c.parameters[i].shape != p.shape) {
      throw ConfigError("checkpoint parameter " + std::to_string(i) + " is '" + c.parameters[i].name + "' " +
                        to_string(c.parameters[i].shape) + ", model has '" + p.name + "' " + to_string(p.shape));
    }
  }
  for (size_t i = 0; i < c.states.size(); ++i) {
    if (c.states[i].name != model.state(i).name ||
        static_cast<int64_t>(c.states[i].values.size()) != model.state(i).size) {
      throw ConfigError("checkpoint statistic '" + c.states[i].name + "' does not match model's '" +
                        model.state(i).name + "'");
    }
  }
  for (size_t i = 0; i < c.parameters.size(); ++i) {
    std::copy(c.parameters[i].values.begin(), c.parameters[i].values.end(), model.weights(i));
  }
  for (size_t i = 0; i < c.states.size(); ++i) {
    std::copy(c.states[i].values.begin(), c.states[i].values.end(), model.state_data(i));
  }
  model.set_training_passes(c.training_passes);
}

Model model_from_checkpoint(const Checkpoint& c) {
  Model model(c.model);
  if (c.kind != CheckpointKind::architecture) {
    restore_weights(model, c);
  }
  return model;
}

void restore_optimizer(Optimizer& optimizer, const Checkpoint& c) {
  if (!c.optimizer_options) {
    throw ConfigError("checkpoint holds no optimizer state");
  }
  optimizer.load_state(c.optimizer_state);
}

}  // namespace tnt::compute
