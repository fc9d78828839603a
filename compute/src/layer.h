#pragma once
// Internal layer interface. Layers are built from LayerSpecs by make_layer()
// and driven by Model; nothing here is public.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dnnl_util.h"
#include "tnt/compute/model.h"
#include "tnt/compute/spec.h"
#include "tnt/compute/tensor.h"

namespace tnt::compute {

struct Parameter {
  ParameterInfo info;
  std::vector<float> value;
  std::vector<float> own_grad;
  float* grad = nullptr;  // own_grad.data() or caller memory (Note [Gradient memory])
  size_t index = 0;       // position in the model's parameter list
  // Initialisation: "glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "zeros", "ones".
  std::string init;
  int64_t fan_in = 1;
  int64_t fan_out = 1;
};

struct StateBuffer {
  StateInfo info;
  std::vector<float> value;
  float initial = 0.0f;
};

struct ForwardContext {
  Mode mode = Mode::training;
  uint64_t step = 0;                 // Note [Dropout masks] in model.h
  int64_t first_sample = 0;          // global index of sample 0 of this micro-batch
  std::span<const int32_t> lengths;  // Note [Sequence padding] in model.h; empty: none padded
  // A decoder's view of its encoder (Note [Sequence-to-sequence form] in spec.h):
  // the memory {N, Ts, D}, its lengths, and where cross-attention adds its
  // memory gradient in backward (zeroed by the Model before the decoder's backward).
  const Tensor* memory = nullptr;
  std::span<const int32_t> memory_lengths = {};
  Tensor* d_memory = nullptr;
  // Training passes of a model with a ReplicaSum (Note [Synchronized BatchNorm] in model.h).
  const ReplicaSum* replica_sum = nullptr;
  // Whether BatchNorm layers without a `sync` option of their own use it (Model::set_replica_sum).
  bool sync_unmarked_batch_norm = true;
};

using ReadyFn = std::function<void(size_t)>;

// Whether a BatchNorm layer of this spec takes its statistics over every replica where a
// ReplicaSum is set: its own `sync` option decides, and without one `sync_unmarked` (the run's
// setting). Note [Synchronized BatchNorm] in layers_dnnl.cpp.
bool batch_norm_synchronizes(const LayerSpec& spec, bool sync_unmarked);

// Note [Roofline]: a layer states the work of one pass at its current batch
// size: flops (a multiply-add counts 2) and the bytes it must move at least
// (each tensor it reads or writes once, in float32). The benchmark divides
// them by the measured time and compares with a measured FMA peak and copy
// bandwidth; real kernels move more than the minimum (BatchNorm reads its
// input twice), so a memory-bound kind below 100 % of the copy bandwidth is
// not necessarily improvable. Reorders book themselves (detail::Reorder::run),
// wherever they run: `convert` where they change the element type, `reorder`
// where only the layout; a layer's own time excludes them.
struct LayerCost {
  double flops = 0.0;
  double bytes = 0.0;
};

// The cost of a layer that multiplies its input by `weights` values,
// `macs_per_output` multiply-adds per output (layers_dnnl.cpp).
LayerCost linear_cost(bool backward, bool need_dx, int64_t in, int64_t out, int64_t weights, int64_t macs_per_output);

// Times layers by kind (Note [Roofline]); active while a profiled Model runs
// forward or backward on this thread. A layer's time excludes the layers
// nested in it (a residual block's own time is its sum and activation).
class Profiler {
 public:
  using Clock = std::chrono::steady_clock;
  // The profiler for this thread, or nullptr when none is active.
  static Profiler* active();
  // Makes `profiler` (may be nullptr) the active one for this scope, for a
  // forward or a backward pass (what books itself, as detail::Reorder does,
  // takes the pass from here).
  class Activate {
   public:
    Activate(Profiler* profiler, bool backward);
    ~Activate();
    Activate(const Activate&) = delete;
    Activate& operator=(const Activate&) = delete;

   private:
    Profiler* previous_;
    bool previous_backward_;
  };

  void begin();
  void end(const std::string& kind, bool backward, const LayerCost& cost);
  std::vector<LayerKindProfile> result() const;
  void clear() { kinds_.clear(); }
  bool in_backward() const { return backward_; }

 private:
  struct Frame {
    Clock::time_point start;
    double children = 0.0;
  };
  std::vector<Frame> stack_;
  std::map<std::string, LayerKindProfile> kinds_;
  bool backward_ = false;
};

class Layer {
 public:
  Layer(LayerSpec spec, std::string name) : spec_(std::move(spec)), name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const LayerSpec& spec() const { return spec_; }
  const std::string& name() const { return name_; }

  // Called once with the per-sample input shape: creates the parameters,
  // returns the per-sample output shape. Throws on shapes the layer cannot take.
  virtual Shape setup(const Shape& sample_input) = 0;
  // Called when the input (batch size or layout) changes: (re)creates the
  // primitives for input data in layout `input` and returns the layout of the
  // output. Layers that do not accept_blocked() get plain input.
  // input_gradient: whether backward() will be asked for dx (layers may
  // choose their algorithms accordingly; asking anyway stays correct).
  virtual dnnl::memory::desc prepare(const dnnl::memory::desc& input, bool input_gradient) = 0;
  // Whether the layer takes its input in any oneDNN layout (see
  // Note [Layouts] in layers_dnnl.cpp); otherwise the Chain reorders to plain.
  virtual bool accepts_blocked() const { return false; }
  // x must stay alive and unchanged until backward() (its output does, and the
  // model's caller keeps the model input). x and dy are in the layouts given
  // to / returned by prepare(); the returned dx is in x's layout.
  virtual const Tensor& forward(const Tensor& x, const ForwardContext& context) = 0;
  // Writes parameter gradients, announces them via ready (highest index
  // first), returns the input gradient when need_dx, else nullptr.
  virtual const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) = 0;

  // For the profile (Note [Roofline]): the kind this layer's time is booked
  // under, and the cost of one pass given the element counts of its input
  // and output at the prepared batch size. The default suits memory-bound
  // layers: forward reads x and writes y, backward reads x and dy and writes
  // dx (when need_dx).
  virtual std::string kind() const { return spec_.type; }
  // Fusion: called once after setup with the layer that follows in the same
  // chain; returning true means this layer now also does `next`'s work and
  // the chain skips `next` (BatchNorm absorbs a following ReLU).
  virtual bool absorb(const Layer& next) { return false; }
  virtual LayerCost cost(bool backward, bool need_dx, int64_t in, int64_t out) const;

  virtual void collect(std::vector<Parameter*>& params, std::vector<StateBuffer*>& states);
  // Note [Training memory] in model.cpp: the floats per sample that the layers nested in this one
  // keep for backward (their outputs).
  virtual int64_t nested_activation_floats() const { return 0; }
  // Note [Mixed precision] in runtime.h: set before prepare(); layers that
  // hold other layers pass it on.
  virtual void set_precision(Precision precision) { precision_ = precision; }
  // Note [Spare buffers] (runtime.cpp): called once the input gradient that
  // backward() returned has been consumed; the layer releases the storage of
  // its gradients and of anything else only a backward pass needs. The next
  // backward() takes buffers again.
  virtual void release_gradients() {}
  // Whether backward() reads this layer's forward output. Layers whose
  // backward needs only their input say no, so a residual block may sum into
  // their output in place (Note [Spare buffers]).
  virtual bool backward_reads_output() const { return true; }
  // Note [bf16 between layers] (layers_basic.cpp): called once after setup by
  // the Chain when every reader of this layer's output takes bf16, so a bf16
  // run may write it (and take its gradient) in bf16. Layers that cannot
  // ignore it.
  virtual void allow_bf16_output() {}
  // Note [Synchronized BatchNorm] in layers_dnnl.cpp: a training pass without samples on this
  // replica; the layer (and those nested in it, in the order their passes would run) makes the
  // replica sums its forward (backward = false) or backward pass would make.
  virtual void pass_without_samples(const ReplicaSum& sum, bool sync_unmarked, bool backward) {}

 protected:
  Parameter& add_parameter(const std::string& suffix, Shape shape, std::string init, int64_t fan_in, int64_t fan_out);
  StateBuffer& add_state(const std::string& suffix, int64_t size, float initial);
  // Announces this layer's own parameters, highest index first.
  void announce(const ReadyFn& ready) const;
  // The element type of the operands of this layer's dot products.
  dnnl::memory::data_type compute_type() const {
    return precision_ == Precision::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  }

  Precision precision_ = Precision::fp32;
  LayerSpec spec_;
  std::string name_;
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::unique_ptr<StateBuffer>> states_;
};

// A straight sequence of layers: the model's body and each residual branch.
class Chain {
 public:
  void add(std::shared_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }
  bool empty() const { return layers_.empty(); }
  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }
  const Shape& sample_output(size_t i) const { return sample_out_[i]; }

  Shape setup(const Shape& sample_input);
  // Returns the layout of the chain's output.
  dnnl::memory::desc prepare(const dnnl::memory::desc& input, bool input_gradient);
  const Tensor& forward(const Tensor& x, const ForwardContext& context);
  // need_dx: whether the chain's own input gradient is wanted.
  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready);
  void collect(std::vector<Parameter*>& params, std::vector<StateBuffer*>& states);
  // Layer::pass_without_samples for each layer: in order forward, in reverse backward.
  void pass_without_samples(const ReplicaSum& sum, bool sync_unmarked, bool backward);
  // Floats per sample of every layer's output, nested layers included (after setup).
  int64_t activation_floats() const;
  void set_precision(Precision precision);
  // Layer::release_gradients for the layers whose buffers backward()'s
  // result may be in (the chain's own input gradient); backward() releases
  // the others as it goes.
  void release_gradients();
  // Whether the caller may overwrite what forward() returned: no backward
  // reads the last layer's output (Layer::backward_reads_output).
  bool output_is_free() const;
  // Note [bf16 between layers]: lets the layer that makes the chain's output
  // write it in bf16 where it can (a convolution, BatchNorm after it or not).
  void allow_bf16_output();

 private:
  void allow_bf16_between_layers();
  // The indices of the layers that run (absorbed ones left out).
  std::vector<size_t> running_layers() const;
  struct ToPlain {  // before a layer that wants plain input
    detail::Reorder forward, backward;
    Tensor x, dx;
    int64_t dx_floats = 0;  // storage size of the layer input in its own layout
  };
  std::vector<std::shared_ptr<Layer>> layers_;
  std::vector<bool> absorbed_;  // done by the layer before (Layer::absorb)
  std::vector<ToPlain> to_plain_;
  std::vector<size_t> holding_;              // layers whose gradient buffers backward()'s result may be in
  std::vector<int64_t> pass_in_, pass_out_;  // element counts of each layer's input and output, last forward
  std::vector<Shape> sample_out_;
};

// Builds a layer; name_prefix is prepended to the generated name
// ("res3.main." ...). index is the layer's position in its container.
std::shared_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& name_prefix, size_t index);

// Option access with clear errors ("layer conv2d_0: option 'kernel' ...").
class OptionReader {
 public:
  OptionReader(const LayerSpec& spec, std::string layer_name);
  int64_t integer(const std::string& key, int64_t fallback) const;
  int64_t required_integer(const std::string& key) const;
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string text(const std::string& key, const std::string& fallback) const;
  // A pair (h, w); a single integer n means (n, n).
  std::vector<int64_t> pair(const std::string& key, std::vector<int64_t> fallback) const;
  // Throws if the spec has an option not in `known`.
  void check_known(const std::vector<std::string>& known) const;

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  const LayerSpec& spec_;
  std::string layer_;
};

}  // namespace tnt::compute
