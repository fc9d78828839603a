// ONNX file -> ModelSpec + initial weights (tnt/compute/onnx.h).
//
// Note [ONNX graphs as chains]: a tnt model is a chain of layers whose only fork is the residual
// block, out = act(main(x) + shortcut(x)). An ONNX graph is any DAG, so the import walks back
// from the graph's one output to its one input: a node with one data input becomes a layer (or
// nothing, for Identity and an inference-time Dropout's bookkeeping), and an Add of two computed
// values is a residual block whose branches are the two chains from the nearest value both
// descend from (the fork) to the Add; the longer branch is the main one. A ReLU right after the
// Add becomes the block's activation. Anything else, an unsupported operator, a second output, a
// value read from two places that are not a residual fork, an attribute with no tnt equivalent,
// is refused with the node, its operator, the opset and the value it reads, so a network is
// never imported different from what the file says.
//
// Exporters' idioms that are folded into one layer: Pad (zeros, height and width only) before a
// Conv or an AveragePool (PyTorch's AvgPool2d with count_include_pad exports so); MatMul then Add
// of a constant (Keras' Dense through tf2onnx); Flatten, or Reshape to (N, -1), before a dense
// layer, which flattens its input anyway; Reshape's shape computed from the input's own batch
// size (x.view(x.size(0), -1) exports Shape -> Gather -> Unsqueeze -> Concat). Initializers
// reached through Identity nodes are copied to each layer that reads them, never tied.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "tnt/compute/onnx.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

constexpr int64_t kOldestOpset = 9;
constexpr int64_t kNewestOpset = 17;
// Layers, and the nodes of shape computations that layers read (Reshape's target).
const std::set<std::string> kKnownOperators{"Conv",    "Gemm",        "MatMul",   "Add",
                                            "Relu",    "Sigmoid",     "Tanh",     "BatchNormalization",
                                            "MaxPool", "AveragePool", "Pad",      "GlobalAveragePool",
                                            "Flatten", "Reshape",     "Softmax",  "LogSoftmax",
                                            "Dropout", "Identity",    "Constant", "Shape",
                                            "Gather",  "Unsqueeze",   "Concat",   "Cast"};

struct Constant {
  std::vector<int64_t> dims;
  std::vector<float> floats;  // float tensors
  std::vector<int64_t> ints;  // int64 / int32 tensors
  bool is_float = false;
};

// A layer with the values it starts from, and its residual branches.
struct Piece {
  LayerSpec spec;
  std::vector<std::vector<float>> parameters;
  std::vector<std::vector<float>> states;
  std::vector<std::vector<Piece>> branches;
};

// ONNX stores float attributes: 0.001 comes back as 0.0010000000474974513. The shortest decimal
// that reads back as the same float is what the exporter meant (tnt computes in float anyway).
double shortest(float value) {
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof text, value);
  double out = value;
  if (error == std::errc()) std::from_chars(text, end, out);
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string origin) : model_(model), origin_(std::move(origin)) {}

  OnnxImport run() {
    read_opset();
    const onnx::GraphProto& g = model_.graph();
    for (const auto& t : g.initializer()) constants_[t.name()] = read_tensor(t, "initializer '" + t.name() + "'");
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      for (const auto& out : n.output()) {
        if (out.empty()) continue;
        if (producer_.contains(out) || constants_.contains(out)) {
          fail(n, "", "its output '" + out + "' is also produced elsewhere");
        }
        producer_[out] = &n;
      }
      // Shape reads only a tensor's dimensions, not its data: no fork in the network.
      for (const auto& in : n.input()) {
        if (!in.empty() && n.op_type() != "Shape") ++readers_[in];
      }
      if (n.op_type() == "Constant") constants_[n.output(0)] = constant_node(n);
    }
    // Identity of a constant is that constant (each layer copies what it reads).
    for (const auto& n : g.node()) {
      if (n.op_type() == "Identity" && n.input_size() == 1 && constants_.contains(n.input(0))) {
        constants_[n.output(0)] = constants_.at(n.input(0));
      }
    }
    // An operator tnt has no layer for is named first, whatever else is wrong with the graph.
    const onnx::NodeProto* first_unknown = nullptr;
    std::set<std::string> unknown;
    for (const auto& n : g.node()) {
      if (!kKnownOperators.contains(n.op_type()) || (!n.domain().empty() && n.domain() != "ai.onnx")) {
        if (first_unknown == nullptr) first_unknown = &n;
        unknown.insert(n.op_type());
      }
    }
    if (first_unknown != nullptr) {
      fail(*first_unknown, first_unknown->input_size() ? first_unknown->input(0) : "",
           "operator not supported (the graph has " + join({unknown.begin(), unknown.end()}) + "); tnt imports " +
               join(onnx_supported_operators()) + " (compute/README.md, \"Models from PyTorch and Keras\")");
    }
    read_input();
    if (g.output_size() != 1) {
      throw ConfigError(origin_ + ": the graph has " + std::to_string(g.output_size()) +
                        " outputs; tnt imports models with exactly one output (the logits)");
    }
    std::string last = g.output(0).name();
    // A final Softmax or LogSoftmax: tnt's losses take logits and apply it themselves.
    if (auto it = producer_.find(last);
        it != producer_.end() && (it->second->op_type() == "Softmax" || it->second->op_type() == "LogSoftmax")) {
      check_axis_last(*it->second);
      notes_.push_back("the final " + it->second->op_type() + " (node '" + it->second->name() +
                       "') is left to the loss: tnt's losses take logits");
      last = data_input(*it->second);
    }
    std::vector<Piece> pieces = chain(input_name_, last, 0);
    finish(pieces);
    OnnxImport out;
    out.spec.name = g.name().empty() ? "onnx" : g.name();
    out.spec.input = input_shape_;
    flatten_into(pieces, out.spec.layers, out);
    out.notes = notes_;
    return out;
  }

 private:
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& value, const std::string& what) const {
    std::string msg = origin_ + ": node '" + n.name() + "' (" + n.op_type() + ", opset " + std::to_string(opset_);
    if (!value.empty()) msg += ", reading '" + value + "'";
    msg += "): " + what;
    throw ConfigError(msg);
  }
  [[noreturn]] void unsupported(const onnx::NodeProto& n, const std::string& value) const {
    fail(n, value,
         "operator not supported; tnt imports " + join(onnx_supported_operators()) +
             " (compute/README.md, \"Models from PyTorch and Keras\")");
  }

  void read_opset() {
    for (const auto& o : model_.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    }
    if (opset_ < kOldestOpset || opset_ > kNewestOpset) {
      throw ConfigError(origin_ + ": opset " + std::to_string(opset_) + "; tnt imports opsets " +
                        std::to_string(kOldestOpset) + " to " + std::to_string(kNewestOpset));
    }
  }

  Constant read_tensor(const onnx::TensorProto& t, const std::string& what) const {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      throw ConfigError(origin_ + ": " + what + " keeps its data in an external file; save the model as one file");
    }
    Constant c;
    int64_t count = 1;
    for (int64_t d : t.dims()) {
      if (d < 0 || d > (int64_t{1} << 32) || count > (int64_t{1} << 32) / std::max<int64_t>(d, 1)) {
        throw ConfigError(origin_ + ": " + what + " has an impossible shape");
      }
      c.dims.push_back(d);
      count *= d;
    }
    const auto n = static_cast<size_t>(count);
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT:
        c.is_float = true;
        if (t.has_raw_data()) {
          if (t.raw_data().size() != n * sizeof(float)) {
            throw ConfigError(origin_ + ": " + what + " has " + std::to_string(t.raw_data().size()) +
                              " bytes of data for " + std::to_string(n) + " floats");
          }
          c.floats.resize(n);
          std::memcpy(c.floats.data(), t.raw_data().data(), n * sizeof(float));
        } else {
          if (static_cast<size_t>(t.float_data_size()) != n) {
            throw ConfigError(origin_ + ": " + what + " has " + std::to_string(t.float_data_size()) +
                              " values for its shape of " + std::to_string(n));
          }
          c.floats.assign(t.float_data().begin(), t.float_data().end());
        }
        break;
      case onnx::TensorProto::INT64:
        if (t.has_raw_data()) {
          if (t.raw_data().size() != n * sizeof(int64_t)) {
            throw ConfigError(origin_ + ": " + what + " has the wrong number of bytes");
          }
          c.ints.resize(n);
          std::memcpy(c.ints.data(), t.raw_data().data(), n * sizeof(int64_t));
        } else {
          if (static_cast<size_t>(t.int64_data_size()) != n) {
            throw ConfigError(origin_ + ": " + what + " has the wrong number of values");
          }
          c.ints.assign(t.int64_data().begin(), t.int64_data().end());
        }
        break;
      case onnx::TensorProto::INT32:
        if (t.has_raw_data()) {
          if (t.raw_data().size() != n * sizeof(int32_t)) {
            throw ConfigError(origin_ + ": " + what + " has the wrong number of bytes");
          }
          std::vector<int32_t> v(n);
          std::memcpy(v.data(), t.raw_data().data(), n * sizeof(int32_t));
          c.ints.assign(v.begin(), v.end());
        } else {
          if (static_cast<size_t>(t.int32_data_size()) != n) {
            throw ConfigError(origin_ + ": " + what + " has the wrong number of values");
          }
          c.ints.assign(t.int32_data().begin(), t.int32_data().end());
        }
        break;
      default:
        throw ConfigError(origin_ + ": " + what + " has element type " + std::to_string(t.data_type()) +
                          "; tnt reads float32 weights and int64/int32 shapes");
    }
    return c;
  }

  Constant constant_node(const onnx::NodeProto& n) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t()) return read_tensor(a.t(), "Constant '" + n.name() + "'");
      if (a.name() == "value_ints") return {{a.ints_size()}, {}, {a.ints().begin(), a.ints().end()}, false};
      if (a.name() == "value_int") return {{}, {}, {a.i()}, false};
      if (a.name() == "value_float") return {{}, {a.f()}, {}, true};
      if (a.name() == "value_floats") return {{a.floats_size()}, {a.floats().begin(), a.floats().end()}, {}, true};
    }
    fail(n, "", "a Constant with no tensor, int or float value");
  }

  void read_input() {
    const onnx::GraphProto& g = model_.graph();
    std::vector<const onnx::ValueInfoProto*> inputs;
    for (const auto& v : g.input()) {
      if (!constants_.contains(v.name())) inputs.push_back(&v);
    }
    if (inputs.size() != 1) {
      throw ConfigError(origin_ + ": the graph has " + std::to_string(inputs.size()) +
                        " inputs besides its initializers; tnt imports models with one input");
    }
    const onnx::ValueInfoProto& in = *inputs[0];
    input_name_ = in.name();
    if (!in.type().has_tensor_type() || in.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT ||
        !in.type().tensor_type().has_shape()) {
      throw ConfigError(origin_ + ": input '" + in.name() + "' is not a float32 tensor of known shape");
    }
    const auto& dims = in.type().tensor_type().shape().dim();
    if (dims.size() != 2 && dims.size() != 4) {
      throw ConfigError(origin_ + ": input '" + in.name() + "' has rank " + std::to_string(dims.size()) +
                        "; tnt imports {N, C, H, W} images and {N, features} vectors");
    }
    for (int i = 1; i < dims.size(); ++i) {
      if (!dims[i].has_dim_value() || dims[i].dim_value() < 1) {
        throw ConfigError(origin_ + ": input '" + in.name() + "' dimension " + std::to_string(i) +
                          " is not a fixed size; only the batch dimension may be symbolic");
      }
      input_shape_.push_back(dims[i].dim_value());
    }
    if (dims[0].has_dim_value()) fixed_batch_ = dims[0].dim_value();
  }

  const onnx::NodeProto& producer(const onnx::NodeProto& reader, const std::string& value) const {
    auto it = producer_.find(value);
    if (it == producer_.end()) {
      if (constants_.contains(value)) fail(reader, value, "a constant where tnt needs the computed input");
      fail(reader, value, "the value is neither computed from the model's input nor a constant");
    }
    return *it->second;
  }

  const Constant& constant(const onnx::NodeProto& n, int index, bool is_float = true) const {
    if (index >= n.input_size() || n.input(index).empty())
      fail(n, "", "input " + std::to_string(index) + " is missing");
    auto it = constants_.find(n.input(index));
    if (it == constants_.end()) fail(n, n.input(index), "tnt needs this input to be a constant (an initializer)");
    if (it->second.is_float != is_float) {
      fail(n, n.input(index), is_float ? "expected float weights" : "expected integer values");
    }
    return it->second;
  }
  std::optional<std::string> optional_input(const onnx::NodeProto& n, int index) const {
    if (index < n.input_size() && !n.input(index).empty()) return n.input(index);
    return std::nullopt;
  }

  const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) const {
    const auto* a = attribute(n, name);
    return a ? a->i() : fallback;
  }
  float float_attr(const onnx::NodeProto& n, const std::string& name, float fallback) const {
    const auto* a = attribute(n, name);
    return a ? a->f() : fallback;
  }
  std::vector<int64_t> ints_attr(const onnx::NodeProto& n, const std::string& name,
                                 std::vector<int64_t> fallback) const {
    const auto* a = attribute(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
  }
  void only_attributes(const onnx::NodeProto& n, const std::set<std::string>& known) const {
    for (const auto& a : n.attribute()) {
      if (!known.contains(a.name())) fail(n, "", "attribute '" + a.name() + "' is not supported");
    }
  }

  // The input a layer-like node reads its data from.
  std::string data_input(const onnx::NodeProto& n) const {
    if (n.input_size() < 1 || n.input(0).empty()) fail(n, "", "no data input");
    return n.input(0);
  }

  void check_axis_last(const onnx::NodeProto& n) const {
    const int64_t axis = int_attr(n, "axis", opset_ >= 13 ? -1 : 1);
    if (axis != -1 && axis != 1) fail(n, "", "a final " + n.op_type() + " over axis " + std::to_string(axis));
  }

  // 2-D pads [top, left, bottom, right] must be symmetric: tnt pads both sides alike.
  std::vector<int64_t> symmetric_pads(const onnx::NodeProto& n, const std::vector<int64_t>& pads) const {
    if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3] || pads[0] < 0 || pads[1] < 0) {
      fail(n, "", "asymmetric or negative padding; tnt pads top and bottom, left and right alike");
    }
    return {pads[0], pads[1]};
  }
  void check_auto_pad(const onnx::NodeProto& n) const {
    const auto* a = attribute(n, "auto_pad");
    if (a && a->s() != "NOTSET" && a->s() != "VALID") {
      fail(n, "", "auto_pad " + a->s() + "; export with explicit pads");
    }
  }

  // A Pad of zeros on height and width only, as exporters put before a convolution or a pool:
  // its {top, left} (symmetric) and the value it reads; nothing for any other producer.
  std::optional<std::pair<std::vector<int64_t>, std::string>> zero_pad(const std::string& value) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || it->second->op_type() != "Pad") return std::nullopt;
    const onnx::NodeProto& n = *it->second;
    only_attributes(n, {"mode", "pads", "value"});
    if (const auto* mode = attribute(n, "mode"); mode && mode->s() != "constant") {
      fail(n, "", "Pad mode " + mode->s() + "; tnt pads with zeros");
    }
    std::vector<int64_t> pads = opset_ >= 11 ? constant(n, 1, false).ints : ints_attr(n, "pads", {});
    float fill = float_attr(n, "value", 0.0f);
    if (opset_ >= 11 && optional_input(n, 2)) {
      const Constant& v = constant(n, 2);
      if (v.floats.size() != 1) fail(n, n.input(2), "a pad value that is not one number");
      fill = v.floats[0];
    }
    if (fill != 0.0f) fail(n, "", "padding with " + std::to_string(fill) + "; tnt pads with zeros");
    if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0) {
      fail(n, "", "a Pad that is not on height and width of an {N, C, H, W} tensor");
    }
    if (readers_.at(value) != 1) fail(n, "", "a Pad whose output is read twice");
    return std::make_pair(symmetric_pads(n, {pads[2], pads[3], pads[6], pads[7]}), data_input(n));
  }

  // Reshape's target, if it is (batch, -1): from a constant or from the Shape -> Gather ->
  // Unsqueeze -> Concat chain of x.view(x.size(0), -1). kBatch stands for "this tensor's batch".
  static constexpr int64_t kBatch = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> shape_value(const onnx::NodeProto& reader, const std::string& value, int depth) const {
    if (depth > 16) fail(reader, value, "a shape computed in too many steps");
    if (auto c = constants_.find(value); c != constants_.end()) {
      if (c->second.is_float) fail(reader, value, "a float tensor as a shape");
      return c->second.ints;
    }
    const onnx::NodeProto& n = producer(reader, value);
    if (n.op_type() == "Unsqueeze" || n.op_type() == "Cast" || n.op_type() == "Identity") {
      return shape_value(n, data_input(n), depth + 1);
    }
    if (n.op_type() == "Concat") {
      std::vector<int64_t> out;
      for (const auto& in : n.input()) {
        auto part = shape_value(n, in, depth + 1);
        out.insert(out.end(), part.begin(), part.end());
      }
      return out;
    }
    if (n.op_type() == "Gather" && n.input_size() == 2) {
      auto shape = producer_.find(n.input(0));
      const Constant& index = constant(n, 1, false);
      if (shape != producer_.end() && shape->second->op_type() == "Shape" && index.ints.size() == 1 &&
          index.ints[0] == 0 && int_attr(n, "axis", 0) == 0) {
        return {kBatch};
      }
    }
    fail(n, value, "a shape tnt cannot compute before training (it reads the batch size only)");
  }

  bool is_batch_flatten(const onnx::NodeProto& reshape) const {
    const std::vector<int64_t> shape = shape_value(reshape, reshape.input(1), 0);
    if (shape.size() != 2) return false;
    const bool batch_first = shape[0] == kBatch || shape[0] == 0 || (fixed_batch_ && shape[0] == *fixed_batch_);
    return batch_first && (shape[1] == -1 || shape[1] > 0);
  }

  // The values on the data path from `value` back to the input, nearest first.
  std::vector<std::string> ancestry(std::string value) const {
    std::vector<std::string> out;
    while (value != input_name_ && out.size() <= static_cast<size_t>(model_.graph().node_size())) {
      out.push_back(value);
      auto it = producer_.find(value);
      if (it == producer_.end() || it->second->input_size() == 0) break;
      value = it->second->input(0);
    }
    out.push_back(input_name_);
    return out;
  }

  // Note [ONNX graphs as chains]: the layers that compute `to` from `from`.
  std::vector<Piece> chain(const std::string& from, const std::string& to, size_t depth) {
    if (depth > kMaxModelNesting) {
      throw ConfigError(origin_ + ": residual blocks nested more than " + std::to_string(kMaxModelNesting) + " deep");
    }
    std::vector<Piece> reversed;
    std::string v = to;
    size_t steps = 0;
    while (v != from) {
      if (++steps > static_cast<size_t>(model_.graph().node_size()) + 1 || ++layer_count_ > kMaxModelLayers) {
        throw ConfigError(origin_ + ": the graph is not a chain of layers from its input to its output");
      }
      auto it = producer_.find(v);
      if (it == producer_.end()) {
        throw ConfigError(origin_ + ": value '" + v + "' is " +
                          (v == input_name_
                               ? "the model's input, reached inside a branch that should start at '" + from + "'"
                               : "neither computed from the model's input nor produced by a node"));
      }
      const onnx::NodeProto& n = *it->second;
      // A value read by two nodes is a residual fork; anywhere else the graph is not a chain.
      if (v != to && readers_[v] > 1 && !forks_.contains(v))
        fail(n, "", "its output '" + v + "' is read by two nodes outside a residual block");
      v = layer(n, reversed, depth);
    }
    std::reverse(reversed.begin(), reversed.end());
    return reversed;
  }

  // Appends the layer (or nothing) for node n to `reversed`; returns the value n reads.
  std::string layer(const onnx::NodeProto& n, std::vector<Piece>& reversed, size_t depth) {
    const std::string& op = n.op_type();
    if (!n.domain().empty() && n.domain() != "ai.onnx") unsupported(n, n.input_size() ? n.input(0) : "");
    for (int i = 1; i < n.output_size(); ++i) {
      if (!n.output(i).empty() && readers_[n.output(i)] > 0 && op != "BatchNormalization" && op != "Dropout") {
        fail(n, "", "its second output is used");
      }
    }
    if (op == "Identity") return data_input(n);
    if (op == "Relu" || op == "Sigmoid" || op == "Tanh") {
      only_attributes(n, {});
      const std::string f = op == "Relu" ? "relu" : op == "Sigmoid" ? "sigmoid" : "tanh";
      reversed.push_back({layers::activation(f), {}, {}, {}});
      return data_input(n);
    }
    if (op == "Dropout") {
      double rate = float_attr(n, "ratio", 0.5f);
      if (opset_ >= 12) {
        rate = 0.5;
        if (auto r = optional_input(n, 1)) {
          const Constant& c = constant(n, 1);
          if (c.floats.size() != 1) fail(n, *r, "a ratio that is not one number");
          rate = c.floats[0];
        }
      }
      reversed.push_back({layers::dropout(rate, static_cast<int64_t>(++dropouts_)), {}, {}, {}});
      return data_input(n);
    }
    if (op == "Conv") return conv(n, reversed);
    if (op == "Gemm") return gemm(n, reversed);
    if (op == "MatMul") return matmul(n, {}, reversed);
    if (op == "Add") return add(n, reversed, depth);
    if (op == "BatchNormalization") return batch_norm(n, reversed);
    if (op == "MaxPool" || op == "AveragePool") return pool(n, reversed);
    if (op == "GlobalAveragePool") {
      reversed.push_back({layers::global_avg_pool2d(), {}, {}, {}});
      return data_input(n);
    }
    if (op == "Flatten") {
      if (int_attr(n, "axis", 1) != 1) fail(n, "", "Flatten keeps only the batch dimension in tnt (axis 1)");
      reversed.push_back({layers::flatten(), {}, {}, {}});
      return data_input(n);
    }
    if (op == "Reshape") {
      if (n.input_size() != 2 || !is_batch_flatten(n)) {
        fail(n, n.input_size() ? n.input(0) : "", "a Reshape other than to (batch, -1); tnt reshapes only to flatten");
      }
      reversed.push_back({layers::flatten(), {}, {}, {}});
      return data_input(n);
    }
    if (op == "Softmax" || op == "LogSoftmax") {
      fail(n, n.input_size() ? n.input(0) : "",
           op + " is imported only as the graph's last node (the loss applies it)");
    }
    unsupported(n, n.input_size() ? n.input(0) : "");
  }

  std::string conv(const onnx::NodeProto& n, std::vector<Piece>& reversed) {
    only_attributes(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    check_auto_pad(n);
    const Constant& w = constant(n, 1);
    if (w.dims.size() != 4) fail(n, n.input(1), "a convolution that is not 2-D");
    layers::Conv2DOptions o;
    o.filters = w.dims[0];
    o.kernel = ints_attr(n, "kernel_shape", {w.dims[2], w.dims[3]});
    if (o.kernel != std::vector<int64_t>{w.dims[2], w.dims[3]}) fail(n, "", "kernel_shape differs from the weights'");
    o.stride = ints_attr(n, "strides", {1, 1});
    o.dilation = ints_attr(n, "dilations", {1, 1});
    o.padding = symmetric_pads(n, ints_attr(n, "pads", {0, 0, 0, 0}));
    o.groups = int_attr(n, "group", 1);
    if (o.stride.size() != 2 || o.dilation.size() != 2) fail(n, "", "strides and dilations must have 2 entries");
    Piece p;
    p.parameters.push_back(w.floats);
    o.bias = optional_input(n, 2).has_value();
    if (o.bias) {
      const Constant& b = constant(n, 2);
      if (static_cast<int64_t>(b.floats.size()) != o.filters) fail(n, n.input(2), "a bias of the wrong size");
      p.parameters.push_back(b.floats);
    }
    std::string from = data_input(n);
    if (auto pad = zero_pad(from)) {
      o.padding = {o.padding[0] + pad->first[0], o.padding[1] + pad->first[1]};
      from = pad->second;
    }
    p.spec = layers::conv2d(o);
    reversed.push_back(std::move(p));
    return from;
  }

  // A dense layer from weights {out, in} (tnt's layout) or {in, out} (transposed).
  Piece dense(const onnx::NodeProto& n, const Constant& w, bool in_out, std::optional<std::vector<float>> bias) {
    if (w.dims.size() != 2) fail(n, "", "dense weights that are not a matrix");
    const int64_t out = in_out ? w.dims[1] : w.dims[0], in = in_out ? w.dims[0] : w.dims[1];
    std::vector<float> weights(w.floats);
    if (in_out) {
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) weights[o * in + i] = w.floats[i * out + o];
      }
    }
    Piece p{layers::dense(out, bias.has_value()), {std::move(weights)}, {}, {}};
    if (bias) {
      if (static_cast<int64_t>(bias->size()) != out) fail(n, "", "a bias of the wrong size");
      p.parameters.push_back(std::move(*bias));
    }
    return p;
  }

  std::string gemm(const onnx::NodeProto& n, std::vector<Piece>& reversed) {
    only_attributes(n, {"alpha", "beta", "transA", "transB"});
    if (int_attr(n, "transA", 0) != 0 || float_attr(n, "alpha", 1.0f) != 1.0f || float_attr(n, "beta", 1.0f) != 1.0f) {
      fail(n, "", "Gemm with transA, alpha or beta; tnt imports y = x W^T + b");
    }
    std::optional<std::vector<float>> bias;
    if (optional_input(n, 2)) bias = constant(n, 2).floats;
    reversed.push_back(dense(n, constant(n, 1), int_attr(n, "transB", 0) == 0, std::move(bias)));
    return data_input(n);
  }

  std::string matmul(const onnx::NodeProto& n, std::optional<std::vector<float>> bias, std::vector<Piece>& reversed) {
    reversed.push_back(dense(n, constant(n, 1), true, std::move(bias)));
    return data_input(n);
  }

  std::string add(const onnx::NodeProto& n, std::vector<Piece>& reversed, size_t depth) {
    if (n.input_size() != 2) fail(n, "", "an Add of other than two values");
    const bool c0 = constants_.contains(n.input(0)), c1 = constants_.contains(n.input(1));
    if (c0 || c1) {
      // MatMul then Add of a constant is a dense layer with a bias.
      const std::string& computed = n.input(c0 ? 1 : 0);
      auto it = producer_.find(computed);
      if (c0 == c1 || it == producer_.end() || it->second->op_type() != "MatMul" || readers_[computed] != 1) {
        fail(n, computed, "an Add of a constant that does not follow a MatMul");
      }
      return matmul(*it->second, constant(n, c0 ? 0 : 1).floats, reversed);
    }
    // A residual block: the branches run from the nearest common ancestor to the Add.
    const auto a = ancestry(n.input(0));
    const auto b = ancestry(n.input(1));
    std::string fork;
    for (const auto& v : b) {
      if (std::find(a.begin(), a.end(), v) != a.end()) {
        fork = v;
        break;
      }
    }
    if (readers_[fork] < 2) fail(n, "", "an Add whose inputs do not fork from one value");
    std::vector<Piece> first = chain(fork, n.input(0), depth + 1);
    std::vector<Piece> second = chain(fork, n.input(1), depth + 1);
    if (second.size() > first.size()) std::swap(first, second);
    Piece block{layers::residual({}, {}, "linear"), {}, {}, {std::move(first), std::move(second)}};
    reversed.push_back(std::move(block));
    forks_.insert(fork);
    return fork;
  }

  std::string batch_norm(const onnx::NodeProto& n, std::vector<Piece>& reversed) {
    only_attributes(n, {"epsilon", "momentum", "training_mode", "spatial"});
    if (int_attr(n, "spatial", 1) != 1) fail(n, "", "BatchNormalization with spatial = 0");
    const Constant &scale = constant(n, 1), &shift = constant(n, 2), &mean = constant(n, 3), &var = constant(n, 4);
    const size_t c = scale.floats.size();
    if (shift.floats.size() != c || mean.floats.size() != c || var.floats.size() != c) {
      fail(n, "", "scale, bias, mean and variance of different sizes");
    }
    const double momentum = shortest(float_attr(n, "momentum", 0.9f)),
                 epsilon = shortest(float_attr(n, "epsilon", 1e-5f));
    reversed.push_back(
        {layers::batch_norm(momentum, epsilon), {scale.floats, shift.floats}, {mean.floats, var.floats}, {}});
    return data_input(n);
  }

  std::string pool(const onnx::NodeProto& n, std::vector<Piece>& reversed) {
    const bool avg = n.op_type() == "AveragePool";
    if (avg) {
      only_attributes(n, {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
    } else {
      only_attributes(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
      if (ints_attr(n, "dilations", {1, 1}) != std::vector<int64_t>{1, 1}) fail(n, "", "a dilated MaxPool");
    }
    check_auto_pad(n);
    if (int_attr(n, "ceil_mode", 0) != 0) fail(n, "", "ceil_mode = 1; tnt's pools round down");
    const std::vector<int64_t> kernel = ints_attr(n, "kernel_shape", {});
    const std::vector<int64_t> stride = ints_attr(n, "strides", {1, 1});
    if (kernel.size() != 2 || stride.size() != 2) fail(n, "", "a pool that is not 2-D");
    std::vector<int64_t> padding = symmetric_pads(n, ints_attr(n, "pads", {0, 0, 0, 0}));
    bool include_padding = avg && int_attr(n, "count_include_pad", 0) != 0;
    std::string from = data_input(n);
    if (avg) {
      if (auto pad = zero_pad(from)) {
        if ((padding[0] || padding[1]) && !include_padding) {
          fail(n, "", "a Pad before an AveragePool that pads and leaves the padding out of its count");
        }
        padding = {padding[0] + pad->first[0], padding[1] + pad->first[1]};
        include_padding = true;
        from = pad->second;
      }
    }
    LayerSpec spec{
        avg ? "avg_pool2d" : "max_pool2d", {{"kernel", kernel}, {"stride", stride}, {"padding", padding}}, {}};
    if (include_padding) spec.options["include_padding"] = true;
    reversed.push_back({std::move(spec), {}, {}, {}});
    return from;
  }

  // Merges a ReLU after a residual block into the block, and drops a flatten right before a dense
  // layer (dense flattens its input): the network is the same, tnt's form of it shorter.
  void finish(std::vector<Piece>& pieces) {
    std::vector<Piece> out;
    for (auto& p : pieces) {
      for (auto& branch : p.branches) finish(branch);
      if (!out.empty() && out.back().spec.type == "residual" && p.spec.type == "activation" &&
          std::get<std::string>(p.spec.options.at("function")) == "relu" &&
          std::get<std::string>(out.back().spec.options.at("activation")) == "linear") {
        out.back().spec.options["activation"] = std::string("relu");
        continue;
      }
      if (!out.empty() && out.back().spec.type == "flatten" && p.spec.type == "dense") {
        out.pop_back();
        notes_.push_back("a flatten before a dense layer is left to the dense layer, which flattens its input");
      }
      out.push_back(std::move(p));
    }
    pieces = std::move(out);
  }

  void flatten_into(std::vector<Piece>& pieces, std::vector<LayerSpec>& layers, OnnxImport& out) {
    for (auto& p : pieces) {
      for (auto& w : p.parameters) out.parameters.push_back(std::move(w));
      for (auto& s : p.states) out.states.push_back(std::move(s));
      p.spec.branches.clear();
      for (auto& branch : p.branches) {
        p.spec.branches.emplace_back();
        flatten_into(branch, p.spec.branches.back(), out);
      }
      if (p.spec.type == "residual" && p.spec.branches.size() == 2 && p.spec.branches[1].empty()) {
        p.spec.branches.pop_back();
      }
      layers.push_back(std::move(p.spec));
    }
  }

  const onnx::ModelProto& model_;
  std::string origin_;
  int64_t opset_ = 0;
  std::map<std::string, Constant> constants_;
  std::map<std::string, const onnx::NodeProto*> producer_;
  std::map<std::string, int> readers_;
  std::string input_name_;
  Shape input_shape_;
  std::optional<int64_t> fixed_batch_;
  std::vector<std::string> notes_;
  std::set<std::string> forks_;  // values that feed residual blocks, read twice by design
  size_t dropouts_ = 0;
  size_t layer_count_ = 0;
};

}  // namespace

const std::vector<std::string>& onnx_supported_operators() {
  static const std::vector<std::string> ops{"Conv",
                                            "Gemm",
                                            "MatMul+Add",
                                            "Relu",
                                            "Sigmoid",
                                            "Tanh",
                                            "BatchNormalization",
                                            "MaxPool",
                                            "AveragePool",
                                            "Pad (zeros, before Conv/AveragePool)",
                                            "GlobalAveragePool",
                                            "Add (residual)",
                                            "Flatten",
                                            "Reshape to (N, -1)",
                                            "Softmax/LogSoftmax (last)",
                                            "Dropout",
                                            "Identity",
                                            "Constant"};
  return ops;
}

OnnxImport import_onnx_bytes(const std::string& bytes, const std::string& origin) {
  onnx::ModelProto model;
  if (bytes.size() > (size_t{1} << 31) || !model.ParseFromString(bytes)) {
    throw ConfigError(origin + ": not an ONNX model (the protobuf does not parse: a truncated or foreign file)");
  }
  if (!model.has_graph() || model.ir_version() < 3 || model.graph().node_size() == 0) {
    throw ConfigError(origin + ": not an ONNX model (no IR version or no graph)");
  }
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw ConfigError(origin + ": onnx::checker refuses the model: " + e.what());
  }
  return Importer(model, origin).run();
}

OnnxImport import_onnx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open ONNX file '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return import_onnx_bytes(bytes.str(), path);
}

void load_onnx_weights(const OnnxImport& imported, Model& model) {
  if (model.parameter_count() != imported.parameters.size() || model.state_count() != imported.states.size()) {
    throw ConfigError("the ONNX import's weights do not fit the model (" + std::to_string(imported.parameters.size()) +
                      " parameters for " + std::to_string(model.parameter_count()) + ")");
  }
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    const auto& w = imported.parameters[i];
    if (static_cast<int64_t>(w.size()) != model.parameter(i).size) {
      throw ConfigError("ONNX weights for " + model.parameter(i).name + " have " + std::to_string(w.size()) +
                        " values, the layer " + std::to_string(model.parameter(i).size));
    }
    std::copy(w.begin(), w.end(), model.weights(i));
  }
  for (size_t i = 0; i < model.state_count(); ++i) {
    const auto& s = imported.states[i];
    if (static_cast<int64_t>(s.size()) != model.state(i).size) {
      throw ConfigError("ONNX statistics for " + model.state(i).name + " do not fit the layer");
    }
    std::copy(s.begin(), s.end(), model.state_data(i));
  }
}

Model Model::from_onnx(const std::string& path) {
  OnnxImport imported = import_onnx(path);
  Model model(imported.spec);
  load_onnx_weights(imported, model);
  return model;
}

}  // namespace tnt::compute
