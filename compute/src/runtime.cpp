#include <omp.h>

#include <sstream>
#include <stdexcept>

#include "dnnl_util.h"
#include "layer.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"

namespace tnt::compute {

int64_t element_count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    out << (i ? ", " : "") << shape[i];
  }
  out << ']';
  return out.str();
}

Tensor::Tensor(Shape shape) : shape_(std::move(shape)), values_(static_cast<size_t>(element_count(shape_))) {}

Tensor::Tensor(Shape shape, std::vector<float> values) : shape_(std::move(shape)), values_(std::move(values)) {
  if (static_cast<int64_t>(values_.size()) != element_count(shape_)) {
    throw ConfigError("Tensor: shape " + to_string(shape_) + " needs " + std::to_string(element_count(shape_)) +
                      " values, got " + std::to_string(values_.size()));
  }
}

void Tensor::resize(const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      throw ConfigError("Tensor: negative dimension in " + to_string(shape));
    }
  }
  shape_ = shape;
  values_.resize(static_cast<size_t>(element_count(shape_)));
}

void Tensor::resize_storage(const Shape& shape, int64_t floats) {
  if (floats < element_count(shape)) {
    throw ConfigError("Tensor: storage of " + std::to_string(floats) + " floats is too small for " + to_string(shape));
  }
  shape_ = shape;
  values_.resize(static_cast<size_t>(floats));
}

void Tensor::reshape(const Shape& shape) {
  if (element_count(shape) != size()) {
    throw ConfigError("Tensor: cannot reshape " + to_string(shape_) + " to " + to_string(shape));
  }
  shape_ = shape;
}

void set_num_threads(int threads) {
  if (threads < 1) {
    throw ConfigError("set_num_threads: need at least 1 thread, got " + std::to_string(threads));
  }
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

std::string runtime_description() {
  const dnnl_version_t* v = dnnl_version();
  std::ostringstream out;
  out << "oneDNN " << v->major << '.' << v->minor << '.' << v->patch << " (cpu runtime: OpenMP, " << num_threads()
      << " threads)";
  return out.str();
}

namespace detail {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  // Compute is driven by one thread per model (see model.h); oneDNN CPU
  // streams with the OpenMP runtime execute synchronously.
  static thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

bool is_plain(const dnnl::memory::desc& desc) { return desc == plain_desc(desc.dims()); }

const char* layout_name(const dnnl::memory::desc& desc) {
  using tag = dnnl::memory::format_tag;
  const auto dims = desc.dims();
  if (dims.size() != 4) {
    return is_plain(desc) ? "plain" : "other";
  }
  for (auto [t, name] : {std::pair{tag::nchw, "nchw"}, {tag::nhwc, "nhwc"}, {tag::nChw8c, "nChw8c"}}) {
    if (desc == dnnl::memory::desc(dims, dnnl::memory::data_type::f32, t)) {
      return name;
    }
  }
  return "other";
}

int64_t storage_floats(const dnnl::memory::desc& desc) { return static_cast<int64_t>(desc.get_size() / sizeof(float)); }

void Reorder::prepare(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  from_ = from;
  to_ = to;
  needed_ = from != to;
  if (needed_) {
    primitive_ = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
  }
}

void Reorder::run(const float* from, float* to) const {
  primitive_.execute(cpu_stream(), {{DNNL_ARG_FROM, wrap(from_, from)}, {DNNL_ARG_TO, wrap(to_, to)}});
}

dnnl::memory::desc plain_desc(const Shape& dims) {
  using tag = dnnl::memory::format_tag;
  static const tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  if (dims.empty() || dims.size() > 5) {
    throw ConfigError("plain_desc: unsupported rank " + std::to_string(dims.size()));
  }
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32,
                            tags[dims.size() - 1]);
}

}  // namespace detail

void Layer::collect(std::vector<Parameter*>& params, std::vector<StateBuffer*>& states) {
  for (auto& p : params_) {
    params.push_back(p.get());
  }
  for (auto& s : states_) {
    states.push_back(s.get());
  }
}

Parameter& Layer::add_parameter(const std::string& suffix, Shape shape, std::string init, int64_t fan_in,
                                int64_t fan_out) {
  auto p = std::make_unique<Parameter>();
  p->info.name = name_ + "." + suffix;
  p->info.size = element_count(shape);
  p->info.shape = std::move(shape);
  p->value.assign(static_cast<size_t>(p->info.size), 0.0f);
  p->own_grad.assign(static_cast<size_t>(p->info.size), 0.0f);
  p->grad = p->own_grad.data();
  p->init = std::move(init);
  p->fan_in = fan_in;
  p->fan_out = fan_out;
  params_.push_back(std::move(p));
  return *params_.back();
}

StateBuffer& Layer::add_state(const std::string& suffix, int64_t size, float initial) {
  auto s = std::make_unique<StateBuffer>();
  s->info.name = name_ + "." + suffix;
  s->info.size = size;
  s->value.assign(static_cast<size_t>(size), initial);
  s->initial = initial;
  states_.push_back(std::move(s));
  return *states_.back();
}

void Layer::announce(const ReadyFn& ready) const {
  if (!ready) {
    return;
  }
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    ready((*it)->index);
  }
}

OptionReader::OptionReader(const LayerSpec& spec, std::string layer_name)
    : spec_(spec), layer_(std::move(layer_name)) {}

void OptionReader::fail(const std::string& key, const std::string& what) const {
  throw ConfigError("layer " + layer_ + " (" + spec_.type + "): option '" + key + "' " + what);
}

int64_t OptionReader::integer(const std::string& key, int64_t fallback) const {
  auto it = spec_.options.find(key);
  if (it == spec_.options.end()) {
    return fallback;
  }
  if (const auto* v = std::get_if<int64_t>(&it->second)) {
    return *v;
  }
  fail(key, "must be an integer");
}

int64_t OptionReader::required_integer(const std::string& key) const {
  if (!spec_.options.contains(key)) {
    fail(key, "is required");
  }
  return integer(key, 0);
}

double OptionReader::number(const std::string& key, double fallback) const {
  auto it = spec_.options.find(key);
  if (it == spec_.options.end()) {
    return fallback;
  }
  if (const auto* v = std::get_if<double>(&it->second)) {
    return *v;
  }
  if (const auto* v = std::get_if<int64_t>(&it->second)) {
    return static_cast<double>(*v);
  }
  fail(key, "must be a number");
}

bool OptionReader::boolean(const std::string& key, bool fallback) const {
  auto it = spec_.options.find(key);
  if (it == spec_.options.end()) {
    return fallback;
  }
  if (const auto* v = std::get_if<bool>(&it->second)) {
    return *v;
  }
  fail(key, "must be true or false");
}

std::string OptionReader::text(const std::string& key, const std::string& fallback) const {
  auto it = spec_.options.find(key);
  if (it == spec_.options.end()) {
    return fallback;
  }
  if (const auto* v = std::get_if<std::string>(&it->second)) {
    return *v;
  }
  fail(key, "must be a string");
}

std::vector<int64_t> OptionReader::pair(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = spec_.options.find(key);
  if (it == spec_.options.end()) {
    return fallback;
  }
  if (const auto* v = std::get_if<int64_t>(&it->second)) {
    return {*v, *v};
  }
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) {
    if (v->size() == 2) {
      return *v;
    }
  }
  fail(key, "must be an integer or a list of two integers");
}

void OptionReader::check_known(const std::vector<std::string>& known) const {
  for (const auto& [key, value] : spec_.options) {
    bool found = false;
    for (const auto& k : known) {
      found = found || k == key;
    }
    if (!found) {
      fail(key, "is not known");
    }
  }
}

}  // namespace tnt::compute
