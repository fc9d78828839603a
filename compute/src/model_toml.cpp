// ModelSpec <-> TOML (conf/models/*.toml). See compute/README.md for the format.
#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "tnt/compute/spec.h"
#include "tnt/core/error.h"
#include "tnt/core/toml_bounds.h"

namespace tnt::compute {
namespace {

std::string where(const std::string& origin, const toml::node& node) {
  const auto& begin = node.source().begin;
  return origin + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column);
}

std::vector<int64_t> integer_list(const std::string& origin, const std::string& key, const toml::node& node) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    throw ConfigError(where(origin, node) + ": '" + key + "' must be a list of integers");
  }
  std::vector<int64_t> out;
  for (const toml::node& item : *array) {
    auto v = item.value<int64_t>();
    if (!item.is_integer() || !v) {
      throw ConfigError(where(origin, item) + ": '" + key + "' must be a list of integers");
    }
    out.push_back(*v);
  }
  return out;
}

// Note [Model file bounds]: a model file is refused before anything is built from it when it is
// larger than kMaxModelFileBytes, nests residual blocks deeper than kMaxModelNesting or has more
// than kMaxModelLayers layers in all. Building, preparing and running a model recurse once per
// nesting level and keep buffers per layer, so without these a small file could overflow the
// stack (2,000 nested blocks did, in Residual::prepare) or grow without end (100,000 activations
// reached 24 GB). The parser itself recurses only through nesting, and counts as it goes;
// check_toml_key_depth (core/) keeps toml++ from recursing through a deep dotted key first.
struct LayerBudget {
  const std::string& origin;
  std::size_t layers = 0;
};

std::vector<LayerSpec> parse_layers(LayerBudget& budget, const std::string& key, const toml::node& node,
                                    std::size_t depth);

LayerSpec parse_layer(LayerBudget& budget, const toml::node& node, std::size_t depth) {
  const std::string& origin = budget.origin;
  if (++budget.layers > kMaxModelLayers) {
    throw ConfigError(where(origin, node) + ": more than " + std::to_string(kMaxModelLayers) +
                      " layers in all (the limit of a model file; compute/README.md)");
  }
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    throw ConfigError(where(origin, node) + ": a layer must be a table");
  }
  LayerSpec spec;
  auto type = (*table)["type"].value<std::string>();
  if (!type) {
    throw ConfigError(where(origin, node) + ": layer has no string 'type'");
  }
  spec.type = *type;
  for (const auto& [k, value] : *table) {
    const std::string key(k.str());
    if (key == "type") {
      continue;
    }
    if (spec.type == "residual" && (key == "main" || key == "shortcut")) {
      if (depth + 1 > kMaxModelNesting) {
        throw ConfigError(where(origin, value) + ": residual blocks nested more than " +
                          std::to_string(kMaxModelNesting) + " deep (the limit of a model file; compute/README.md)");
      }
      size_t slot = key == "main" ? 0 : 1;
      if (spec.branches.size() <= slot) {
        spec.branches.resize(slot + 1);
      }
      spec.branches[slot] = parse_layers(budget, key, value, depth + 1);
      continue;
    }
    if (auto b = value.as_boolean()) {
      spec.options[key] = b->get();
    } else if (auto i = value.as_integer()) {
      spec.options[key] = i->get();
    } else if (auto f = value.as_floating_point()) {
      spec.options[key] = f->get();
    } else if (auto s = value.as_string()) {
      spec.options[key] = s->get();
    } else if (value.is_array()) {
      spec.options[key] = integer_list(origin, key, value);
    } else {
      throw ConfigError(where(origin, value) + ": option '" + key + "' of layer type '" + spec.type +
                        "' has an unsupported value type");
    }
  }
  if (spec.type == "residual" && (spec.branches.empty() || spec.branches[0].empty())) {
    throw ConfigError(where(origin, node) + ": residual layer needs [[...main]] layers");
  }
  return spec;
}

std::vector<LayerSpec> parse_layers(LayerBudget& budget, const std::string& key, const toml::node& node,
                                    std::size_t depth) {
  const std::string& origin = budget.origin;
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    throw ConfigError(where(origin, node) + ": '" + key + "' must be an array of tables ([[" + key + "]])");
  }
  std::vector<LayerSpec> out;
  for (const toml::node& item : *array) {
    out.push_back(parse_layer(budget, item, depth));
  }
  return out;
}

toml::table layer_table(const LayerSpec& spec);

toml::array layers_array(const std::vector<LayerSpec>& layers) {
  toml::array out;
  for (const LayerSpec& l : layers) {
    out.push_back(layer_table(l));
  }
  return out;
}

toml::table layer_table(const LayerSpec& spec) {
  toml::table t;
  t.insert("type", spec.type);
  for (const auto& [key, value] : spec.options) {
    std::visit(
        [&, k = key](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
            toml::array a;
            for (int64_t x : v) {
              a.push_back(x);
            }
            t.insert(k, std::move(a));
          } else {
            t.insert(k, v);
          }
        },
        value);
  }
  if (spec.type == "residual") {
    if (!spec.branches.empty()) {
      t.insert("main", layers_array(spec.branches[0]));
    }
    if (spec.branches.size() > 1 && !spec.branches[1].empty()) {
      t.insert("shortcut", layers_array(spec.branches[1]));
    }
  }
  return t;
}

}  // namespace

ModelSpec parse_model_toml(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxModelFileBytes) {
    throw ConfigError(origin + ": " + std::to_string(text.size()) + " bytes, more than a model file may have (" +
                      std::to_string(kMaxModelFileBytes) + "; compute/README.md)");
  }
  check_toml_key_depth(text, origin);
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    throw ConfigError(msg.str());
  }
  ModelSpec spec;
  spec.name = root["name"].value_or(std::string("model"));
  const toml::node* input = root.get("input");
  if (input == nullptr) {
    throw ConfigError(origin + ": missing 'input' (the per-sample shape, e.g. [1, 28, 28])");
  }
  spec.input = integer_list(origin, "input", *input);
  const toml::node* layers = root.get("layers");
  if (layers == nullptr) {
    throw ConfigError(origin + ": missing [[layers]]");
  }
  LayerBudget budget{origin};
  spec.layers = parse_layers(budget, "layers", *layers, 0);
  // Note [Sequence-to-sequence form] in spec.h: both keys or neither.
  const toml::node* decoder_input = root.get("decoder_input");
  const toml::node* decoder = root.get("decoder");
  if ((decoder_input == nullptr) != (decoder == nullptr)) {
    throw ConfigError(origin + ": an encoder-decoder model needs both 'decoder_input' (the target's shape, e.g. " +
                      "[64]) and [[decoder]] layers");
  }
  if (decoder != nullptr) {
    spec.decoder_input = integer_list(origin, "decoder_input", *decoder_input);
    spec.decoder = parse_layers(budget, "decoder", *decoder, 0);
    if (spec.decoder.empty()) {
      throw ConfigError(where(origin, *decoder) + ": [[decoder]] has no layers");
    }
  }
  for (const auto& [k, value] : root) {
    const std::string_view key = k.str();
    if (key != "name" && key != "input" && key != "layers" && key != "decoder_input" && key != "decoder") {
      throw ConfigError(where(origin, value) + ": unknown key '" + std::string(key) + "'");
    }
  }
  return spec;
}

ModelSpec load_model_toml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError("cannot open model file '" + path + "'");
  }
  // Refused before it is read: Note [Model file bounds].
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > kMaxModelFileBytes) {
    throw ConfigError(path + ": " + std::to_string(bytes) + " bytes, more than a model file may have (" +
                      std::to_string(kMaxModelFileBytes) + "; compute/README.md)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_toml(text.str(), path);
}

std::string to_toml(const ModelSpec& spec) {
  toml::table root;
  root.insert("name", spec.name);
  toml::array input;
  for (int64_t d : spec.input) {
    input.push_back(d);
  }
  root.insert("input", std::move(input));
  root.insert("layers", layers_array(spec.layers));
  if (spec.is_sequence_to_sequence()) {
    toml::array decoder_input;
    for (int64_t d : spec.decoder_input) {
      decoder_input.push_back(d);
    }
    root.insert("decoder_input", std::move(decoder_input));
    root.insert("decoder", layers_array(spec.decoder));
  }
  std::ostringstream out;
  out << root << '\n';
  return out.str();
}

}  // namespace tnt::compute
