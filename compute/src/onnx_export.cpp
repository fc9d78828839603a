// Model -> ONNX inference graph (tnt/compute/onnx.h).
//
// Opset 13 (what OpenCV 4.6 and every current runtime read), a symbolic batch dimension "N", the
// weights as float initializers, BatchNorm as BatchNormalization with its running statistics,
// Dropout left out (inference), and no Identity nodes (OpenCV 4.6 refuses them). A dense layer
// after a {C, H, W} sample gets a Flatten first and GlobalAveragePool one after, so the graph's
// shapes are tnt's; import_onnx drops a Flatten before a dense layer again, so a round trip gives
// back the same layers and, bitwise, the same weights.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <fstream>
#include <variant>

#include "tnt/compute/onnx.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

constexpr int64_t kExportOpset = 13;
constexpr int64_t kExportIrVersion = 7;  // the IR version of opset 13

std::vector<int64_t> option_pair(const LayerSpec& spec, const std::string& key, std::vector<int64_t> fallback) {
  auto it = spec.options.find(key);
  if (it == spec.options.end()) return fallback;
  if (const auto* n = std::get_if<int64_t>(&it->second)) return {*n, *n};
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second); v && v->size() == 2) return *v;
  throw ConfigError("layer " + spec.type + ": option '" + key + "' is not an integer or a pair");
}
template <typename T>
T option(const LayerSpec& spec, const std::string& key, T fallback) {
  auto it = spec.options.find(key);
  if (it == spec.options.end()) return fallback;
  if (const auto* v = std::get_if<T>(&it->second)) return *v;
  if constexpr (std::is_same_v<T, double>) {
    if (const auto* n = std::get_if<int64_t>(&it->second)) return static_cast<double>(*n);
  }
  throw ConfigError("layer " + spec.type + ": option '" + key + "' has the wrong type");
}

class Exporter {
 public:
  Exporter(const Model& model, onnx::GraphProto& graph) : model_(model), graph_(graph) {}

  // Emits `layers` reading `x` (a sample of rank `rank`); returns the last value's name.
  std::string chain(const std::vector<LayerSpec>& layers, std::string x, size_t& rank) {
    for (const LayerSpec& l : layers) x = layer(l, x, rank);
    return x;
  }

  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<onnx::AttributeProto>& attributes = {}) {
    onnx::NodeProto* n = graph_.add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(++nodes_));
    for (const auto& i : inputs) n->add_input(i);
    const std::string out = n->name() + "_out";
    n->add_output(out);
    for (const auto& a : attributes) *n->add_attribute() = a;
    return out;
  }

  // The next parameter (Note [Parameter order]) or state, as an initializer.
  std::string parameter(std::vector<int64_t> dims = {}) {
    const ParameterInfo& p = model_.parameter(next_parameter_);
    return initializer(p.name, dims.empty() ? p.shape : dims, model_.weights(next_parameter_++), p.size);
  }
  std::string state() {
    const StateInfo& s = model_.state(next_state_);
    return initializer(s.name, {s.size}, model_.state_data(next_state_++), s.size);
  }

  size_t parameters_used() const { return next_parameter_; }

 private:
  std::string initializer(const std::string& name, const Shape& dims, const float* values, int64_t size) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values), static_cast<size_t>(size) * sizeof(float)));
    return name;
  }

  static onnx::AttributeProto ints(const std::string& name, const std::vector<int64_t>& values) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a.add_ints(v);
    return a;
  }
  static onnx::AttributeProto integer(const std::string& name, int64_t value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(value);
    return a;
  }
  static onnx::AttributeProto real(const std::string& name, double value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(static_cast<float>(value));
    return a;
  }

  std::string activation(const std::string& function, const std::string& x) {
    if (function == "relu") return node("Relu", {x});
    if (function == "sigmoid") return node("Sigmoid", {x});
    if (function == "tanh") return node("Tanh", {x});
    if (function == "linear") return x;
    throw ConfigError("ONNX export: activation '" + function +
                      "' is not exported (relu, sigmoid, tanh and linear are; the importer reads the same)");
  }

  std::string flatten(const std::string& x, size_t& rank) {
    if (rank == 1) return x;
    rank = 1;
    return node("Flatten", {x}, {integer("axis", 1)});
  }

  std::string layer(const LayerSpec& l, const std::string& x, size_t& rank) {
    if (l.type == "conv2d") {
      const auto kernel = option_pair(l, "kernel", {3, 3}), padding = option_pair(l, "padding", {0, 0});
      std::vector<std::string> inputs{x, parameter()};
      if (option(l, "bias", true)) inputs.push_back(parameter());
      return node(
          "Conv", inputs,
          {ints("kernel_shape", kernel), ints("strides", option_pair(l, "stride", {1, 1})),
           ints("pads", {padding[0], padding[1], padding[0], padding[1]}),
           ints("dilations", option_pair(l, "dilation", {1, 1})), integer("group", option<int64_t>(l, "groups", 1))});
    }
    if (l.type == "dense") {
      const std::string in = flatten(x, rank);
      std::vector<std::string> inputs{in, parameter()};
      if (option(l, "bias", true)) inputs.push_back(parameter());
      return node("Gemm", inputs, {integer("transB", 1)});
    }
    if (l.type == "batch_norm") {
      const std::string scale = parameter(), shift = parameter(), mean = state(), var = state();
      return node("BatchNormalization", {x, scale, shift, mean, var},
                  {real("epsilon", option(l, "epsilon", 1e-3)), real("momentum", option(l, "momentum", 0.99))});
    }
    if (l.type == "max_pool2d" || l.type == "avg_pool2d") {
      const auto kernel = option_pair(l, "kernel", {2, 2}), padding = option_pair(l, "padding", {0, 0});
      auto stride = option_pair(l, "stride", {0, 0});
      for (int i = 0; i < 2; ++i) {
        if (stride[i] == 0) stride[i] = kernel[i];
      }
      std::vector<onnx::AttributeProto> a{ints("kernel_shape", kernel), ints("strides", stride),
                                          ints("pads", {padding[0], padding[1], padding[0], padding[1]})};
      if (l.type == "avg_pool2d") a.push_back(integer("count_include_pad", option(l, "include_padding", false)));
      return node(l.type == "max_pool2d" ? "MaxPool" : "AveragePool", {x}, a);
    }
    if (l.type == "global_avg_pool2d") {
      const std::string pooled = node("GlobalAveragePool", {x});
      rank = 3;
      return flatten(pooled, rank);
    }
    if (l.type == "activation") return activation(option<std::string>(l, "function", "relu"), x);
    if (l.type == "dropout") return x;  // inference
    if (l.type == "flatten") return flatten(x, rank);
    if (l.type == "residual") {
      size_t main_rank = rank, shortcut_rank = rank;
      const std::string main = chain(l.branches.at(0), x, main_rank);
      const std::string shortcut = l.branches.size() > 1 ? chain(l.branches[1], x, shortcut_rank) : x;
      rank = main_rank;
      return activation(option<std::string>(l, "activation", "relu"), node("Add", {main, shortcut}));
    }
    throw ConfigError("ONNX export: layer type '" + l.type +
                      "' is not exported (convolutional and fully connected networks are: compute/README.md)");
  }

  const Model& model_;
  onnx::GraphProto& graph_;
  size_t next_parameter_ = 0, next_state_ = 0;
  int nodes_ = 0;
};

void set_tensor_type(onnx::ValueInfoProto& v, const std::string& name, const Shape& sample) {
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  shape->add_dim()->set_dim_param("N");
  for (int64_t d : sample) shape->add_dim()->set_dim_value(d);
}

}  // namespace

OnnxOutput parse_onnx_output(const std::string& name) {
  if (name == "none") return OnnxOutput::none;
  if (name == "softmax") return OnnxOutput::softmax;
  if (name == "sigmoid") return OnnxOutput::sigmoid;
  throw ConfigError("ONNX output '" + name + "': use none, softmax or sigmoid");
}

std::string export_onnx_bytes(const Model& model, OnnxOutput output) {
  const ModelSpec& spec = model.spec();
  if (spec.is_sequence_to_sequence()) throw ConfigError("ONNX export: encoder-decoder models are not exported");
  onnx::ModelProto proto;
  proto.set_ir_version(kExportIrVersion);
  proto.set_producer_name("tnt");
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kExportOpset);
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(spec.name);
  set_tensor_type(*graph.add_input(), "input", spec.input);
  Exporter exporter(model, graph);
  size_t rank = spec.input.size();
  std::string y = exporter.chain(spec.layers, "input", rank);
  if (output == OnnxOutput::softmax) y = exporter.node("Softmax", {y});
  if (output == OnnxOutput::sigmoid) y = exporter.node("Sigmoid", {y});
  if (y == "input") throw ConfigError("ONNX export: the model computes nothing");
  // The last node's output is the graph's.
  for (auto& out : *graph.mutable_node(graph.node_size() - 1)->mutable_output()) {
    if (out == y) out = "output";
  }
  set_tensor_type(*graph.add_output(), "output", model.output_shape());
  if (exporter.parameters_used() != model.parameter_count()) {
    throw ConfigError("ONNX export: the layers used " + std::to_string(exporter.parameters_used()) + " of " +
                      std::to_string(model.parameter_count()) + " parameters");
  }
  try {
    onnx::checker::check_model(proto);
    // The checker's full check: strict shape inference, types checked.
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw ConfigError(std::string("ONNX export: onnx::checker refuses the graph: ") + e.what());
  }
  return proto.SerializeAsString();
}

void export_onnx(const Model& model, const std::string& path, OnnxOutput output) {
  const std::string bytes = export_onnx_bytes(model, output);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw ConfigError("cannot write ONNX file '" + path + "'");
}

}  // namespace tnt::compute
