// An ONNX file (compute/src/onnx_import.cpp, through libonnx's protobuf classes): imported into a
// ModelSpec and weights; what is accepted must build as a model its weights fit, and export and
// import back to the same weights, bitwise.

#include <cstring>
#include <optional>

#include "fuzz_support.h"
#include "tnt/compute/onnx.h"
#include "tnt/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tnt::compute;
  OnnxImport imported;
  std::optional<Model> model;
  try {
    imported = import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    model.emplace(imported.spec);  // a shape the layers refuse is a ConfigError too
    load_onnx_weights(imported, *model);
  } catch (const tnt::ConfigError&) {
    return 0;
  }
  std::string exported;
  try {
    exported = export_onnx_bytes(*model);
  } catch (const tnt::ConfigError&) {
    return 0;  // e.g. an activation the importer reads but export leaves out: refused, not lost
  }
  try {
    const OnnxImport back = import_onnx_bytes(exported, "export");
    if (back.parameters.size() != imported.parameters.size()) tnt::fuzz::violated("export changed the parameters");
    for (std::size_t i = 0; i < back.parameters.size(); ++i) {
      if (back.parameters[i] != imported.parameters[i] &&
          std::memcmp(back.parameters[i].data(), imported.parameters[i].data(),
                      back.parameters[i].size() * sizeof(float)) != 0) {
        tnt::fuzz::violated("export and import changed parameter " + std::to_string(i));
      }
    }
  } catch (const tnt::ConfigError& e) {
    tnt::fuzz::violated(std::string("tnt's own export does not import: ") + e.what());
  }
  return 0;
}
