#pragma once
#include <memory>
#include <string>

#include "layer.h"

namespace tnt::compute {
// nullptr when spec.type is not one of the oneDNN-backed layers.
std::shared_ptr<Layer> make_dnnl_layer(const LayerSpec& spec, const std::string& name);
// nullptr when spec.type is not one of the sequence layers (layers_sequence.cpp, attention.cpp).
std::shared_ptr<Layer> make_sequence_layer(const LayerSpec& spec, const std::string& name);
// nullptr when spec.type is not an attention layer (attention.cpp).
std::shared_ptr<Layer> make_attention_layer(const LayerSpec& spec, const std::string& name);
}  // namespace tnt::compute
