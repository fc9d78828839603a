#include <omp.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

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

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), values_(values.begin(), values.end()) {
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
  type_ = ElementType::f32;
  values_.resize(static_cast<size_t>(element_count(shape_)));
}

// Note [Spare buffers]: a training step needs every layer's forward output
// until backward, but each input gradient only until the layer before has
// consumed it. Layers give those buffers back (Layer::release_gradients) and
// the next ones take them, so the gradients of a whole network share a few
// buffers instead of one per layer (so do buffers only backward uses, such
// as a convolution's weights in its backward kernels' layout). ResNet-50's
// first step touches that much less fresh memory, which costs more than the
// step's arithmetic on a VM (compute/README.md has the figures). The spares
// are per thread (a Model is used by one thread at a time) and reused step
// after step, so later steps allocate nothing. A residual block saves a
// buffer more by summing into its main branch's output where no backward
// reads it (Layer::backward_reads_output).
namespace {

std::vector<FloatStorage>& spare_buffers() {
  static thread_local std::vector<FloatStorage> spares;
  return spares;
}

// The spare that fits `floats` best: the smallest one already as long (no
// value to write), else the smallest one with the capacity.
bool take_spare(FloatStorage& into, size_t floats) {
  auto& spares = spare_buffers();
  auto best = spares.end();
  auto better = [&](const FloatStorage& a, const FloatStorage& b) {
    const bool a_long = a.size() >= floats, b_long = b.size() >= floats;
    return a_long != b_long ? a_long : a.capacity() < b.capacity();
  };
  for (auto it = spares.begin(); it != spares.end(); ++it) {
    if (it->capacity() >= floats && (best == spares.end() || better(*it, *best))) {
      best = it;
    }
  }
  if (best == spares.end()) {
    return false;
  }
  into = std::move(*best);
  spares.erase(best);
  return true;
}

}  // namespace

void Tensor::resize_storage(const Shape& shape, int64_t floats, ElementType type) {
  const int64_t elements = element_count(shape);
  const int64_t needed = type == ElementType::bf16 ? (elements + 1) / 2 : elements;
  if (floats < needed) {
    throw ConfigError("Tensor: storage of " + std::to_string(floats) + " floats is too small for " + to_string(shape) +
                      (type == ElementType::bf16 ? " in bf16" : ""));
  }
  shape_ = shape;
  type_ = type;
  if (values_.capacity() == 0 && floats > 0) {
    take_spare(values_, static_cast<size_t>(floats));
  }
  values_.resize(static_cast<size_t>(floats));
}

void Tensor::release_storage() {
  shape_.clear();
  type_ = ElementType::f32;
  if (values_.capacity() > 0) {
    spare_buffers().push_back(std::move(values_));
    values_ = {};
  }
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

const char* to_string(Precision precision) { return precision == Precision::bf16 ? "bf16" : "fp32"; }

Precision parse_precision(const std::string& text, const std::string& what) {
  if (text == "fp32") {
    return Precision::fp32;
  }
  if (text == "bf16") {
    return Precision::bf16;
  }
  throw ConfigError(what + ": '" + text + "' is not a precision (fp32 or bf16)");
}

std::string bf16_unsupported_reason() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  if ((isa & bf16) == bf16) {
    return {};
  }
  return "this CPU has no native bf16 (oneDNN's ISA here is below avx512_core_bf16: no AVX512-BF16 or AMX, "
         "or ONEDNN_MAX_CPU_ISA limits it); oneDNN would emulate bf16, slower than fp32";
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

dnnl::memory::format_tag blocked_tag() {
  static const dnnl::memory::format_tag tag = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & avx512) == avx512 ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c;
  }();
  return tag;
}

int64_t block_size() { return blocked_tag() == dnnl::memory::format_tag::nChw16c ? 16 : 8; }

const char* layout_name(const dnnl::memory::desc& desc) {
  using tag = dnnl::memory::format_tag;
  const auto dims = desc.dims();
  if (dims.size() != 4) {
    return is_plain(desc) ? "plain" : "other";
  }
  for (auto [t, name] :
       {std::pair{tag::nchw, "nchw"}, {tag::nhwc, "nhwc"}, {tag::nChw8c, "nChw8c"}, {tag::nChw16c, "nChw16c"}}) {
    if (desc == dnnl::memory::desc(dims, desc.data_type(), t)) {
      return name;
    }
  }
  return "other";
}

int64_t storage_floats(const dnnl::memory::desc& desc) {
  // Rounded up: a bf16 tensor with an odd element count needs the last half float.
  return static_cast<int64_t>((desc.get_size() + sizeof(float) - 1) / sizeof(float));
}

ElementType element_type(const dnnl::memory::desc& desc) {
  return desc.data_type() == dnnl::memory::data_type::bf16 ? ElementType::bf16 : ElementType::f32;
}

dnnl::memory::desc with_type(const dnnl::memory::desc& desc, dnnl::memory::data_type type) {
  // Strides and blocks count elements, so the layout carries over unchanged.
  dnnl::memory::desc out = desc;
  out.data.data_type = dnnl::memory::convert_to_c(type);
  return out;
}

void Reorder::prepare(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  from_ = from;
  to_ = to;
  needed_ = from != to;
  if (needed_) {
    primitive_ = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
  }
}

// Every reorder books itself (Note [Roofline] in layer.h), so the conversions
// between precisions (Note [Mixed precision]) show as a kind of their own, apart from
// the layers that ask for them: `convert` where the element types differ,
// `reorder` where only the layout does. Their traffic is what they read and
// write, at the element sizes they have.
void Reorder::run(const void* from, void* to) const {
  Profiler* profiler = Profiler::active();
  if (profiler != nullptr) {
    profiler->begin();
  }
  primitive_.execute(cpu_stream(), {{DNNL_ARG_FROM, wrap(from_, from)}, {DNNL_ARG_TO, wrap(to_, to)}});
  if (profiler != nullptr) {
    const bool converts = from_.data_type() != to_.data_type();
    profiler->end(converts ? "convert" : "reorder", profiler->in_backward(),
                  {0.0, static_cast<double>(from_.get_size() + to_.get_size())});
  }
}

void BiasGradient::prepare(const dnnl::memory::desc& output_gradient) {
  using tag = dnnl::memory::format_tag;
  from_ = output_gradient;
  const dnnl::memory::dims dims = output_gradient.dims();
  channels_ = dims[1];
  outer_ = dims[0];
  inner_ = 1;
  for (size_t d = 2; d < dims.size(); ++d) {
    inner_ *= dims[d];
  }
  const auto f32 = dnnl::memory::data_type::f32;
  layout_ = Layout::other;
  if (output_gradient == plain_desc(Shape(dims.begin(), dims.end()))) {
    layout_ = dims.size() == 2 ? Layout::channels_last : Layout::channel_planes;
  } else if (dims.size() == 4) {
    if (output_gradient == dnnl::memory::desc(dims, f32, tag::nhwc)) {
      layout_ = Layout::channels_last;
    } else {
      for (auto [blocked, block] : {std::pair{tag::nChw16c, 16}, {tag::nChw8c, 8}}) {
        if (output_gradient == dnnl::memory::desc(dims, f32, blocked)) {
          layout_ = Layout::channel_blocks;
          block_ = block;
        }
      }
    }
  }
  if (layout_ == Layout::channels_last) {
    outer_ *= inner_;  // rows of channels
  }
  if (layout_ == Layout::other) {
    dnnl::memory::dims reduced(dims.size(), 1);
    reduced[1] = channels_;
    to_ = plain_desc(Shape(reduced.begin(), reduced.end()));
    primitive_ = dnnl::reduction(
        dnnl::reduction::primitive_desc({dnnl::algorithm::reduction_sum, from_, to_, 0.0f, 0.0f}, cpu_engine()));
  }
}

void BiasGradient::run(const float* dy, float* db) const {
  std::fill(db, db + channels_, 0.0f);
  switch (layout_) {
    case Layout::channels_last:
      for (int64_t r = 0; r < outer_; ++r) {
        const float* row = dy + r * channels_;
        for (int64_t c = 0; c < channels_; ++c) {
          db[c] += row[c];
        }
      }
      return;
    case Layout::channel_planes:
      for (int64_t n = 0; n < outer_; ++n) {
        for (int64_t c = 0; c < channels_; ++c) {
          const float* plane = dy + (n * channels_ + c) * inner_;
          float sum = 0.0f;
          for (int64_t i = 0; i < inner_; ++i) {
            sum += plane[i];
          }
          db[c] += sum;
        }
      }
      return;
    case Layout::channel_blocks: {
      // {N, C/block (rounded up), H*W, block}; padded channels are left out.
      const int64_t blocks = (channels_ + block_ - 1) / block_;
      float sum[16];  // block_ is 8 or 16
      for (int64_t n = 0; n < outer_; ++n) {
        for (int64_t b = 0; b < blocks; ++b) {
          std::fill(sum, sum + block_, 0.0f);
          const float* at = dy + (n * blocks + b) * inner_ * block_;
          for (int64_t i = 0; i < inner_; ++i) {
            for (int64_t k = 0; k < block_; ++k) {
              sum[k] += at[i * block_ + k];
            }
          }
          for (int64_t k = 0; k < block_ && b * block_ + k < channels_; ++k) {
            db[b * block_ + k] += sum[k];
          }
        }
      }
      return;
    }
    case Layout::other:
      primitive_.execute(cpu_stream(), {{DNNL_ARG_SRC, wrap(from_, dy)}, {DNNL_ARG_DST, wrap(to_, db)}});
      return;
  }
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

LayerCost Layer::cost(bool backward, bool need_dx, int64_t in, int64_t out) const {
  const double elements = static_cast<double>(in + out + (backward && need_dx ? in : 0));
  return {0.0, elements * sizeof(float)};
}

namespace {
thread_local Profiler* active_profiler = nullptr;
}  // namespace

Profiler* Profiler::active() { return active_profiler; }

Profiler::Activate::Activate(Profiler* profiler, bool backward)
    : previous_(active_profiler), previous_backward_(profiler != nullptr && profiler->backward_) {
  active_profiler = profiler;
  if (profiler != nullptr) {
    profiler->backward_ = backward;
  }
}

Profiler::Activate::~Activate() {
  if (active_profiler != nullptr) {
    active_profiler->backward_ = previous_backward_;
  }
  active_profiler = previous_;
}

void Profiler::begin() { stack_.push_back({Clock::now(), 0.0}); }

void Profiler::end(const std::string& kind, bool backward, const LayerCost& cost) {
  const Frame frame = stack_.back();
  stack_.pop_back();
  const double total = std::chrono::duration<double>(Clock::now() - frame.start).count();
  if (!stack_.empty()) {
    stack_.back().children += total;
  }
  LayerKindProfile& k = kinds_[kind];
  k.kind = kind;
  ++k.passes;
  (backward ? k.backward_seconds : k.forward_seconds) += total - frame.children;
  k.flops += cost.flops;
  k.bytes += cost.bytes;
}

std::vector<LayerKindProfile> Profiler::result() const {
  std::vector<LayerKindProfile> out;
  for (const auto& [kind, k] : kinds_) {
    out.push_back(k);
  }
  std::sort(out.begin(), out.end(), [](const LayerKindProfile& a, const LayerKindProfile& b) {
    return a.forward_seconds + a.backward_seconds > b.forward_seconds + b.backward_seconds;
  });
  return out;
}

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
  // The Model allocates value and own_grad once every layer is set up (Note [Training memory]).
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
