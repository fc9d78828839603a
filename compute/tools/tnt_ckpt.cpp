// tnt-ckpt: print a checkpoint's contents (info) or compare two (diff); export a checkpoint's
// model to ONNX (export-onnx) and show what an ONNX file imports as (onnx-info).
// Exit status: 0 same / ok, 1 the checkpoints differ, 2 bad input.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "tnt/compute/checkpoint.h"
#include "tnt/compute/onnx.h"

namespace {

using namespace tnt::compute;

const char* kind_name(CheckpointKind k) {
  switch (k) {
    case CheckpointKind::full: return "full";
    case CheckpointKind::architecture: return "architecture";
    case CheckpointKind::weights: return "weights";
  }
  return "?";
}

void print_entry(const char* indent, const CheckpointEntry& e) {
  if (const auto* integer = std::get_if<int64_t>(&e.value)) {
    std::printf("%s%s = %lld\n", indent, e.key.c_str(), static_cast<long long>(*integer));
  } else if (const auto* real = std::get_if<double>(&e.value)) {
    std::printf("%s%s = %.17g\n", indent, e.key.c_str(), *real);
  } else {
    std::printf("%s%s = <%zu bytes>\n", indent, e.key.c_str(), std::get<std::vector<uint8_t>>(e.value).size());
  }
}

void print_info(const std::string& path, bool show_toml) {
  Checkpoint c = load_checkpoint(path);
  std::printf("checkpoint   %s\nkind         %s\nmodel        %s, input %s, %zu top-level layers\n", path.c_str(),
              kind_name(c.kind), c.model.name.c_str(), to_string(c.model.input).c_str(), c.model.layers.size());
  std::printf("epoch        %llu\nstep         %llu\ntrain passes %llu\n", static_cast<unsigned long long>(c.epoch),
              static_cast<unsigned long long>(c.step), static_cast<unsigned long long>(c.training_passes));
  int64_t total = 0;
  if (!c.parameters.empty()) {
    std::printf("\n%-44s %-18s %10s %12s %12s\n", "parameter", "shape", "elements", "min", "max");
    for (const auto& p : c.parameters) {
      auto [lo, hi] = std::minmax_element(p.values.begin(), p.values.end());
      std::printf("%-44s %-18s %10zu %12.5g %12.5g\n", p.name.c_str(), to_string(p.shape).c_str(), p.values.size(),
                  p.values.empty() ? 0.0 : *lo, p.values.empty() ? 0.0 : *hi);
      total += static_cast<int64_t>(p.values.size());
    }
    std::printf("total %lld parameters in %zu tensors\n", static_cast<long long>(total), c.parameters.size());
  }
  if (!c.states.empty()) {
    std::printf("statistics   %zu arrays (BatchNorm running mean/variance)\n", c.states.size());
  }
  if (c.optimizer_options) {
    std::printf("optimizer    %s, %llu steps, %zu state slots\n", c.optimizer_options->kind.c_str(),
                static_cast<unsigned long long>(c.optimizer_state.steps), c.optimizer_state.slots.size());
  } else {
    std::printf("optimizer    none\n");
  }
  for (const auto& e : c.extra) print_entry("extra        ", e);
  for (const auto& state : c.callback_states) {
    std::printf("callback     %s: %zu entries\n", state.name.c_str(), state.entries.size());
    for (const auto& e : state.entries) print_entry("               ", e);
  }
  if (show_toml) {
    std::printf("\n%s", to_toml(c.model).c_str());
  }
}

struct Differ {
  double rtol, atol;
  int differences = 0;

  void note(const std::string& what) {
    ++differences;
    std::printf("DIFF %s\n", what.c_str());
  }

  void arrays(const std::string& group, const std::vector<NamedArray>& a, const std::vector<NamedArray>& b) {
    if (a.size() != b.size()) {
      note(group + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " arrays");
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].name != b[i].name || a[i].shape != b[i].shape) {
        note(group + " " + std::to_string(i) + ": '" + a[i].name + "' " + to_string(a[i].shape) + " vs '" + b[i].name +
             "' " + to_string(b[i].shape));
        continue;
      }
      values(group + " " + a[i].name, a[i].values, b[i].values);
    }
  }

  // Trainer and callback state: exact, whatever the tolerances (they are counters, bits of
  // doubles, saved weights whose tolerance would be the weights' own).
  void entries(const std::string& group, const std::vector<CheckpointEntry>& a, const std::vector<CheckpointEntry>& b) {
    if (a.size() != b.size()) {
      note(group + " entries: " + std::to_string(a.size()) + " vs " + std::to_string(b.size()));
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].key != b[i].key || a[i].value != b[i].value) note(group + " entry '" + a[i].key + "'");
    }
  }

  void values(const std::string& what, const std::vector<float>& a, const std::vector<float>& b) {
    int64_t bad = 0;
    double max_abs = 0.0, max_rel = 0.0;
    for (size_t j = 0; j < a.size(); ++j) {
      const double x = a[j], y = b[j];
      const double d = std::abs(x - y);
      const double scale = std::max(std::abs(x), std::abs(y));
      const bool nan_mismatch = std::isnan(x) != std::isnan(y);
      if (nan_mismatch || d > atol + rtol * scale) {
        ++bad;
      }
      max_abs = std::max(max_abs, d);
      if (scale > 0) {
        max_rel = std::max(max_rel, d / scale);
      }
    }
    if (bad > 0) {
      char buf[256];
      std::snprintf(buf, sizeof buf, ": %lld of %zu elements differ (max abs %.3g, max rel %.3g)",
                    static_cast<long long>(bad), a.size(), max_abs, max_rel);
      note(what + buf);
    }
  }
};

int run_diff(const std::string& pa, const std::string& pb, double rtol, double atol) {
  Checkpoint a = load_checkpoint(pa);
  Checkpoint b = load_checkpoint(pb);
  Differ d{rtol, atol};
  if (a.kind != b.kind) {
    d.note(std::string("kind: ") + kind_name(a.kind) + " vs " + kind_name(b.kind));
  }
  if (to_toml(a.model) != to_toml(b.model)) {
    d.note("model configuration differs");
  }
  d.arrays("parameter", a.parameters, b.parameters);
  d.arrays("statistic", a.states, b.states);
  if (a.optimizer_options.has_value() != b.optimizer_options.has_value()) {
    d.note("optimizer present in only one");
  } else if (a.optimizer_options) {
    if (a.optimizer_state.kind != b.optimizer_state.kind || a.optimizer_state.steps != b.optimizer_state.steps ||
        a.optimizer_state.slots.size() != b.optimizer_state.slots.size()) {
      d.note("optimizer kind, step count or slots differ");
    } else {
      for (size_t i = 0; i < a.optimizer_state.slots.size(); ++i) {
        const auto& sa = a.optimizer_state.slots[i];
        const auto& sb = b.optimizer_state.slots[i];
        if (sa.name != sb.name || sa.values.size() != sb.values.size()) {
          d.note("optimizer slot " + sa.name + " vs " + sb.name);
        } else {
          d.values("optimizer slot " + sa.name, sa.values, sb.values);
        }
      }
    }
  }
  if (a.epoch != b.epoch || a.step != b.step || a.training_passes != b.training_passes) {
    d.note("epoch/step/passes: " + std::to_string(a.epoch) + "/" + std::to_string(a.step) + "/" +
           std::to_string(a.training_passes) + " vs " + std::to_string(b.epoch) + "/" + std::to_string(b.step) + "/" +
           std::to_string(b.training_passes));
  }
  d.entries("extra", a.extra, b.extra);
  if (a.callback_states.size() != b.callback_states.size()) {
    d.note("callback states: " + std::to_string(a.callback_states.size()) + " vs " +
           std::to_string(b.callback_states.size()));
  } else {
    for (size_t i = 0; i < a.callback_states.size(); ++i) {
      const auto &sa = a.callback_states[i], &sb = b.callback_states[i];
      if (sa.name != sb.name) {
        d.note("callback state " + std::to_string(i) + ": '" + sa.name + "' vs '" + sb.name + "'");
      } else {
        d.entries("callback " + sa.name, sa.entries, sb.entries);
      }
    }
  }
  if (d.differences == 0) {
    std::printf("same (rtol %g, atol %g)\n", rtol, atol);
    return 0;
  }
  std::printf("%d differences\n", d.differences);
  return 1;
}

void print_onnx_info(const std::string& path, bool toml) {
  const OnnxImport imported = import_onnx(path);
  Model model(imported.spec);
  load_onnx_weights(imported, model);
  std::fputs(model.summary().c_str(), stdout);
  std::printf("parameters   %lld in %zu tensors\n", static_cast<long long>(model.total_parameter_size()),
              model.parameter_count());
  for (const auto& note : imported.notes) std::printf("note         %s\n", note.c_str());
  if (toml) std::fputs(to_toml(imported.spec).c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tnt-ckpt: inspect and compare tnt checkpoints, export them to ONNX"};
  app.require_subcommand(1);
  std::string file, other;
  bool toml = false;
  double rtol = 0.0, atol = 0.0;
  auto* info = app.add_subcommand("info", "print a checkpoint's contents");
  info->add_option("checkpoint", file, "checkpoint file")->required();
  info->add_flag("--toml", toml, "also print the model configuration as TOML");
  auto* diff = app.add_subcommand("diff", "compare two checkpoints; exit 1 when they differ");
  diff->add_option("a", file, "first checkpoint")->required();
  diff->add_option("b", other, "second checkpoint")->required();
  diff->add_option("--rtol", rtol, "relative tolerance per element (default 0: bitwise)")
      ->check(CLI::NonNegativeNumber);
  diff->add_option("--atol", atol, "absolute tolerance per element (default 0)")->check(CLI::NonNegativeNumber);
  std::string output_kind = "none";
  auto* export_onnx_command =
      app.add_subcommand("export-onnx", "write a checkpoint's model and weights as an ONNX inference graph");
  export_onnx_command->add_option("checkpoint", file, "checkpoint file")->required();
  export_onnx_command->add_option("out", other, "ONNX file to write")->required();
  export_onnx_command
      ->add_option("--output", output_kind,
                   "what the graph applies to the logits: none, softmax or sigmoid (a checkpoint does not record "
                   "its loss)")
      ->check(CLI::IsMember({"none", "softmax", "sigmoid"}));
  auto* onnx_info = app.add_subcommand("onnx-info", "print the network an ONNX file imports as, and its parameters");
  onnx_info->add_option("file", file, "ONNX file")->required();
  onnx_info->add_flag("--toml", toml, "also print it as a tnt model file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (info->parsed()) {
      print_info(file, toml);
      return 0;
    }
    if (onnx_info->parsed()) {
      print_onnx_info(file, toml);
      return 0;
    }
    if (export_onnx_command->parsed()) {
      const Model model = model_from_checkpoint(load_checkpoint(file));
      export_onnx(model, other, parse_onnx_output(output_kind));
      std::printf("wrote %s\n", other.c_str());
      return 0;
    }
    return run_diff(file, other, rtol, atol);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tnt-ckpt: %s\n", e.what());
    return 2;
  }
}
