#include "run_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::trainer {
namespace {

struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(fmt::format("{}: [{}]: {}", origin, key, what));
  }

  const toml::table* table(const toml::table& root, const std::string& name,
                           const std::set<std::string>& allowed) const {
    const toml::node* node = root.get(name);
    if (!node) return nullptr;
    const toml::table* t = node->as_table();
    if (!t) fail(name, "must be a table");
    for (const auto& [key, value] : *t) {
      if (!allowed.count(std::string(key.str()))) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(name, fmt::format("unknown key '{}' (known: {})", key.str(), list));
      }
    }
    return t;
  }

  void get(const toml::table* t, const std::string& section, const char* key, std::string& out) const {
    if (!t || !t->get(key)) return;
    auto v = t->get(key)->value<std::string>();
    if (!v) fail(section, fmt::format("'{}' must be a string", key));
    out = *v;
  }
  void get(const toml::table* t, const std::string& section, const char* key, bool& out) const {
    if (!t || !t->get(key)) return;
    auto v = t->get(key)->value<bool>();
    if (!v) fail(section, fmt::format("'{}' must be true or false", key));
    out = *v;
  }
  void get(const toml::table* t, const std::string& section, const char* key, double& out) const {
    if (!t || !t->get(key)) return;
    auto v = t->get(key)->value<double>();
    if (!v) fail(section, fmt::format("'{}' must be a number", key));
    out = *v;
  }
  template <class Int>
  requires std::is_integral_v<Int>
  void get(const toml::table* t, const std::string& section, const char* key, Int& out) const {
    if (!t || !t->get(key)) return;
    const auto* node = t->get(key);
    auto v = node->value_exact<int64_t>();
    if (!v) fail(section, fmt::format("'{}' must be an integer", key));
    if (*v < 0) fail(section, fmt::format("'{}' must not be negative, got {}", key, *v));
    out = static_cast<Int>(*v);
  }
  template <class T>
  void get_list(const toml::table* t, const std::string& section, const char* key, std::vector<T>& out) const {
    if (!t || !t->get(key)) return;
    const toml::array* a = t->get(key)->as_array();
    if (!a) fail(section, fmt::format("'{}' must be an array", key));
    out.clear();
    for (const auto& item : *a) {
      std::optional<T> v;
      if constexpr (std::is_floating_point_v<T>) {
        v = item.value<T>();
      } else {
        v = item.value_exact<int64_t>();
      }
      if (!v) fail(section, fmt::format("'{}' has an element of the wrong type", key));
      out.push_back(*v);
    }
  }
};

std::string resolve_path(const std::string& origin, const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute() || origin.empty()) return path;
  if (std::filesystem::exists(path)) return path;  // relative to the working directory
  auto beside = std::filesystem::path(origin).parent_path() / path;
  return beside.string();
}

}  // namespace

// The run file's table (empty: settings only) with `settings` applied, as a RunConfig.
static RunConfig config_from_table(toml::table root, const std::string& path,
                                   const std::vector<std::string>& settings) {
  for (const auto& setting : settings) {
    const auto eq = setting.find('=');
    const auto dot = setting.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || dot + 1 == eq) {
      throw ConfigError(fmt::format("--set '{}': expected section.key=value", setting));
    }
    const std::string section = setting.substr(0, dot), key = setting.substr(dot + 1, eq - dot - 1);
    toml::table parsed;
    try {
      parsed = toml::parse(std::string_view("value = " + setting.substr(eq + 1)), std::string_view("--set"));
    } catch (const toml::parse_error& e) {
      throw ConfigError(
          fmt::format("--set '{}': the value is not TOML ({}); strings need quotes", setting, e.description()));
    }
    if (!root.contains(section)) root.insert(section, toml::table{});
    toml::table* t = root[section].as_table();
    if (!t) throw ConfigError(fmt::format("--set '{}': '{}' is not a section", setting, section));
    t->insert_or_assign(key, *parsed.get("value"));
  }
  RunConfig c;
  c.origin = path.empty() ? "--set" : path;
  Reader r{c.origin};
  for (const auto& [key, value] : root) {
    static const std::set<std::string> sections{"model",    "data",         "train",      "optimizer",
                                                "schedule", "distribution", "checkpoint", "output"};
    if (!sections.count(std::string(key.str()))) {
      throw ConfigError(
          fmt::format("{}: unknown section or key '{}' (sections: model, data, train, optimizer, schedule, "
                      "distribution, checkpoint, output)",
                      path, key.str()));
    }
  }
  if (auto* t = r.table(root, "model", {"name", "file", "classes"})) {
    r.get(t, "model", "name", c.model);
    std::string file;
    r.get(t, "model", "file", file);
    if (!file.empty()) c.model = resolve_path(path, file);
    r.get(t, "model", "classes", c.classes);
  }
  if (auto* t = r.table(root, "data",
                        {"dataset", "path", "train_size", "test_size", "shape", "classes", "seed", "mean", "std",
                         "crop_padding", "horizontal_flip", "prefetch"})) {
    r.get(t, "data", "dataset", c.dataset);
    r.get(t, "data", "path", c.data_path);
    c.data_path = resolve_path(path, c.data_path);
    r.get(t, "data", "train_size", c.train_size);
    r.get(t, "data", "test_size", c.test_size);
    r.get_list(t, "data", "shape", c.shape);
    r.get(t, "data", "classes", c.num_classes);
    r.get(t, "data", "seed", c.data_seed);
    r.get_list(t, "data", "mean", c.mean);
    r.get_list(t, "data", "std", c.std);
    r.get(t, "data", "crop_padding", c.crop_padding);
    r.get(t, "data", "horizontal_flip", c.horizontal_flip);
    r.get(t, "data", "prefetch", c.prefetch);
  }
  if (auto* t = r.table(root, "train",
                        {"global_batch", "micro_batch", "epochs", "max_steps", "validation_frequency", "eval_batch",
                         "seed", "threads", "drop_remainder"})) {
    r.get(t, "train", "global_batch", c.global_batch);
    r.get(t, "train", "micro_batch", c.micro_batch);
    r.get(t, "train", "epochs", c.epochs);
    r.get(t, "train", "max_steps", c.max_steps);
    r.get(t, "train", "validation_frequency", c.validation_frequency);
    r.get(t, "train", "eval_batch", c.eval_batch);
    r.get(t, "train", "seed", c.seed);
    r.get(t, "train", "threads", c.threads);
    r.get(t, "train", "drop_remainder", c.drop_remainder);
  }
  if (auto* t = r.table(root, "optimizer",
                        {"kind", "momentum", "nesterov", "weight_decay", "beta1", "beta2", "epsilon", "rho",
                         "initial_accumulator"})) {
    auto& o = c.optimizer;
    r.get(t, "optimizer", "kind", o.kind);
    r.get(t, "optimizer", "momentum", o.momentum);
    r.get(t, "optimizer", "nesterov", o.nesterov);
    r.get(t, "optimizer", "weight_decay", o.weight_decay);
    r.get(t, "optimizer", "beta1", o.beta1);
    r.get(t, "optimizer", "beta2", o.beta2);
    r.get(t, "optimizer", "epsilon", o.epsilon);
    r.get(t, "optimizer", "rho", o.rho);
    r.get(t, "optimizer", "initial_accumulator", o.initial_accumulator);
  }
  if (auto* t = r.table(root, "schedule",
                        {"kind", "learning_rate", "warmup_steps", "boundaries", "values", "decay_rate", "decay_steps",
                         "staircase", "scale_with_ranks"})) {
    auto& s = c.schedule;
    r.get(t, "schedule", "kind", s.kind);
    r.get(t, "schedule", "learning_rate", s.base_rate);
    r.get(t, "schedule", "warmup_steps", s.warmup_steps);
    r.get_list(t, "schedule", "boundaries", s.boundaries);
    r.get_list(t, "schedule", "values", s.values);
    r.get(t, "schedule", "decay_rate", s.decay_rate);
    r.get(t, "schedule", "decay_steps", s.decay_steps);
    r.get(t, "schedule", "staircase", s.staircase);
    r.get(t, "schedule", "scale_with_ranks", c.scale_rate_with_ranks);
  }
  if (auto* t = r.table(root, "distribution", {"fusion_threshold_kb", "overlap", "transport"})) {
    r.get(t, "distribution", "fusion_threshold_kb", c.fusion_threshold_kb);
    r.get(t, "distribution", "overlap", c.overlap);
    r.get(t, "distribution", "transport", c.transport);
  }
  if (auto* t = r.table(root, "checkpoint", {"path", "every_epochs", "every_steps", "resume"})) {
    r.get(t, "checkpoint", "path", c.checkpoint_path);
    r.get(t, "checkpoint", "every_epochs", c.checkpoint_every_epochs);
    r.get(t, "checkpoint", "every_steps", c.checkpoint_every_steps);
    r.get(t, "checkpoint", "resume", c.resume);
  }
  if (auto* t = r.table(root, "output", {"csv", "timeline", "progress", "print_steps"})) {
    r.get(t, "output", "csv", c.csv);
    r.get(t, "output", "timeline", c.timeline);
    r.get(t, "output", "progress", c.progress);
    r.get(t, "output", "print_steps", c.print_steps);
  }
  return c;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& settings) {
  toml::table root;
  if (!path.empty()) {
    try {
      root = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      throw ConfigError(
          fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, e.description()));
    }
  }
  return config_from_table(std::move(root), path, settings);
}

RunConfig parse_run_config(std::string_view text, const std::string& origin, const std::vector<std::string>& settings) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(origin));
  } catch (const toml::parse_error& e) {
    throw ConfigError(
        fmt::format("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column, e.description()));
  }
  return config_from_table(std::move(root), origin, settings);
}

void validate(const RunConfig& c) {
  auto bad = [](const std::string& what) { throw ConfigError(what); };
  if (c.global_batch == 0 && c.micro_batch == 0)
    bad("give a global batch size (--global-batch) or a micro-batch size (--micro-batch)");
  if (c.epochs == 0) bad("epochs must be at least 1");
  if (c.threads < 1) bad("threads must be at least 1");
  if (c.eval_batch == 0) bad("eval_batch must be at least 1");
  if (!c.transport.empty() && c.transport != "tcp" && c.transport != "ib") {
    bad(fmt::format("transport '{}': expected tcp or ib", c.transport));
  }
  if (c.mean.size() != c.std.size()) bad("data.mean and data.std need the same number of values");
  if (c.dataset == "synthetic") {
    if (c.shape.size() != 3) bad("data.shape must be [channels, height, width]");
    for (auto d : c.shape)
      if (d <= 0) bad("data.shape values must be positive");
    if (c.train_size == 0) bad("a synthetic data set needs data.train_size (--train-size)");
    if (c.num_classes < 2) bad("a synthetic data set needs at least 2 classes");
  }
  if ((c.checkpoint_every_epochs || c.checkpoint_every_steps) && c.checkpoint_path.empty()) {
    bad("checkpoints are asked for but no checkpoint path is given (--checkpoint FILE)");
  }
}

std::string canonical_text(const RunConfig& c) {
  // Only what changes the arithmetic or the order of collectives: paths and output options may
  // differ between ranks.
  std::ostringstream s;
  s << "model=" << c.model << ";classes=" << c.classes << ";dataset=" << c.dataset << ";train_size=" << c.train_size
    << ";test_size=" << c.test_size << ";shape=";
  for (auto d : c.shape) s << d << ',';
  s << ";num_classes=" << c.num_classes << ";data_seed=" << c.data_seed << ";global_batch=" << c.global_batch
    << ";micro_batch=" << c.micro_batch << ";epochs=" << c.epochs << ";max_steps=" << c.max_steps
    << ";validation_frequency=" << c.validation_frequency << ";eval_batch=" << c.eval_batch << ";seed=" << c.seed
    << ";drop_remainder=" << c.drop_remainder << ";optimizer=" << c.optimizer.kind << ',' << c.optimizer.momentum << ','
    << c.optimizer.nesterov << ',' << c.optimizer.weight_decay << ";schedule=" << c.schedule.kind << ','
    << c.schedule.base_rate << ',' << c.schedule.warmup_steps << ";scale_with_ranks=" << c.scale_rate_with_ranks
    << ";fusion_kb=" << c.fusion_threshold_kb << ";overlap=" << c.overlap
    << ";checkpoint_every=" << c.checkpoint_every_epochs << ',' << c.checkpoint_every_steps
    << ";resume=" << !c.resume.empty();
  return s.str();
}

compute::ModelSpec resolve_model(const RunConfig& c, int data_classes, const data::SampleShape& data_shape) {
  const auto names = compute::zoo::names();
  const int64_t classes = c.classes > 0 ? c.classes : data_classes;
  const compute::Shape input{static_cast<int64_t>(data_shape.channels), static_cast<int64_t>(data_shape.height),
                             static_cast<int64_t>(data_shape.width)};
  compute::ModelSpec spec;
  if (std::find(names.begin(), names.end(), c.model) != names.end()) {
    if (c.model == "lenet5") {
      spec = compute::zoo::lenet5(input, classes);
    } else if (c.model == "mlp") {
      spec = compute::zoo::mlp(input, {256, 128}, classes);
    } else if (c.model == "resnet20") {
      spec = compute::zoo::resnet20(classes);
    } else if (c.model == "resnet50") {
      spec = compute::zoo::resnet50(classes);
    } else {
      spec = compute::zoo::by_name(c.model);
    }
  } else if (std::filesystem::exists(c.model)) {
    spec = compute::load_model_toml(c.model);
  } else {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError(fmt::format("model '{}' is neither a zoo model ({}) nor an existing model file", c.model, list));
  }
  if (spec.input != input) {
    throw ConfigError(fmt::format("model '{}' takes input {} but the data set '{}' gives {}", c.model,
                                  compute::to_string(spec.input), c.dataset, compute::to_string(input)));
  }
  return spec;
}

Sources make_sources(const RunConfig& c) {
  data::SourceConfig s;
  s.kind = data::parse_source_kind(c.dataset);
  s.path = c.data_path;
  Sources out;
  if (s.kind == data::SourceKind::synthetic) {
    // One generator; the test split is the stretch after the training samples, so both come
    // from the same class-dependent distribution.
    s.shape = {static_cast<std::size_t>(c.shape.at(0)), static_cast<std::size_t>(c.shape.at(1)),
               static_cast<std::size_t>(c.shape.at(2))};
    s.num_classes = c.num_classes;
    s.size = c.train_size + c.test_size;
    s.seed = c.data_seed;
    auto all = data::make_source(s);
    out.train = data::make_subset(all, 0, c.train_size);
    if (c.test_size > 0) out.test = data::make_subset(all, c.train_size, c.test_size);
    return out;
  }
  s.split = data::Split::train;
  s.size = c.train_size;
  out.train = data::make_source(s);
  s.split = data::Split::test;
  s.size = c.test_size;
  out.test = data::make_source(s);
  return out;
}

static std::vector<float> floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

data::TransformOptions train_transform(const RunConfig& c) {
  data::TransformOptions t;
  t.mean = floats(c.mean);
  t.std = floats(c.std);
  t.crop_padding = c.crop_padding;
  t.horizontal_flip = c.horizontal_flip;
  t.seed = c.seed;
  return t;
}

data::TransformOptions eval_transform(const RunConfig& c) {
  data::TransformOptions t;
  t.mean = floats(c.mean);
  t.std = floats(c.std);
  return t;
}

}  // namespace tnt::trainer
