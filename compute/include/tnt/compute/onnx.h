#pragma once
// ONNX models in and out (compute/README.md, "Models from PyTorch and Keras").
//
// Import turns an ONNX file (PyTorch's torch.onnx.export, Keras through tf2onnx) into a ModelSpec
// plus its initializers as the initial weights; export writes a Model's inference graph with its
// weights (opset 13, symbolic batch, BatchNorm with its running statistics, no Identity nodes).
// Both go through Debian's libonnx (protobuf classes and onnx::checker); the Note [ONNX graphs
// as chains] in onnx_import.cpp says which graphs import and why the rest are refused.
#include <string>
#include <vector>

#include "tnt/compute/model.h"
#include "tnt/compute/spec.h"

namespace tnt::compute {

struct OnnxImport {
  ModelSpec spec;
  // In Note [Parameter order] and the model's state order (BatchNorm running mean, then variance).
  std::vector<std::vector<float>> parameters;
  std::vector<std::vector<float>> states;
  // What the import changed without changing the network's meaning, for the user to read
  // (a final Softmax left to the loss, a Flatten before a dense layer, ...).
  std::vector<std::string> notes;
};

// The operators import_onnx maps onto tnt's layers, for messages and docs.
const std::vector<std::string>& onnx_supported_operators();

// Throws ConfigError naming the node, its operator, the opset and the value it reads for anything
// it cannot import exactly; never returns a different network.
OnnxImport import_onnx_bytes(const std::string& bytes, const std::string& origin = "<bytes>");
OnnxImport import_onnx(const std::string& path);
// Copies an import's weights and BatchNorm statistics into a model built from its spec.
void load_onnx_weights(const OnnxImport& imported, Model& model);

enum class OnnxOutput { none, softmax, sigmoid };
OnnxOutput parse_onnx_output(const std::string& name);  // "none", "softmax", "sigmoid"

// The inference graph of `model` with its weights; throws ConfigError for a layer ONNX export
// does not cover (sequence layers), and for a graph that onnx::checker (with strict shape
// inference) refuses.
std::string export_onnx_bytes(const Model& model, OnnxOutput output = OnnxOutput::none);
void export_onnx(const Model& model, const std::string& path, OnnxOutput output = OnnxOutput::none);

}  // namespace tnt::compute
