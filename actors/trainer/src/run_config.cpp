#include "run_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tnt/collectives/communicator.h"
#include "tnt/compute/model.h"
#include "tnt/compute/onnx.h"
#include "tnt/compute/runtime.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"
#include "tnt/core/machine.h"
#include "tnt/core/toml_bounds.h"

namespace tnt::trainer {
namespace {

struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(fmt::format("{}: [{}]: {}", origin, key, what));
  }

  // `name` may be dotted: "callbacks.terminate_on_nan" is a table inside [callbacks].
  const toml::table* table(const toml::table& root, const std::string& name,
                           const std::set<std::string>& allowed) const {
    const toml::node* node = root.at_path(name).node();
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
  void read(const toml::table* t, const std::string& section, const char* key, T& out) const {
    get(t, section, key, out);
  }
  template <class T>
  void read(const toml::table* t, const std::string& section, const char* key, std::vector<T>& out) const {
    get_list(t, section, key, out);
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
      } else if constexpr (std::is_same_v<T, std::string>) {
        v = item.value<std::string>();
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

// `--set section.key=value` settings, written into the file's table before it is read.
void apply_settings(toml::table& root, const std::vector<std::string>& settings) {
  for (const auto& setting : settings) {
    const auto eq = setting.find('=');
    const auto dot = eq == std::string::npos ? std::string::npos : setting.rfind('.', eq);
    if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || dot + 1 == eq) {
      throw ConfigError(fmt::format("--set '{}': expected section.key=value", quote_cut(setting)));
    }
    const std::string section = setting.substr(0, dot), key = setting.substr(dot + 1, eq - dot - 1);
    toml::table parsed;
    try {
      parsed = toml::parse(std::string_view("value = " + setting.substr(eq + 1)), std::string_view("--set"));
    } catch (const toml::parse_error& e) {
      throw ConfigError(fmt::format("--set '{}': the value is not TOML ({}); strings need quotes", quote_cut(setting),
                                    e.description()));
    }
    // A dotted section is a path of tables: callbacks.terminate_on_nan.enabled=false.
    toml::table* t = &root;
    for (std::size_t begin = 0; begin <= section.size();) {
      const auto end = std::min(section.find('.', begin), section.size());
      const std::string name = section.substr(begin, end - begin);
      if (!t->contains(name)) t->insert(name, toml::table{});
      t = (*t)[name].as_table();
      if (!t)
        throw ConfigError(
            fmt::format("--set '{}': '{}' is not a section", quote_cut(setting), quote_cut(section.substr(0, end))));
      begin = end + 1;
    }
    t->insert_or_assign(key, *parsed.get("value"));
  }
}

}  // namespace

const std::vector<RunKey>& run_keys() {
  // clang-format off
  static const std::vector<RunKey> keys{
      {"model", "name", +[](RunConfig& c) -> auto& { return c.model; }, "--model",
       "Zoo model (lenet5, mlp, resnet20, resnet50, transformer, transformer_tiny) or a model TOML file"},
      {"model", "file", +[](RunConfig& c) -> auto& { return c.model; }, nullptr, nullptr, {}, true},
      {"model", "onnx", +[](RunConfig& c) -> auto& { return c.model_onnx; }, "--model-onnx",
       "Train the network of this ONNX file (from PyTorch, Keras through tf2onnx), its weights the starting point "
       "(compute/README.md, \"Models from PyTorch and Keras\")", {}, true},
      {"model", "load_weights", +[](RunConfig& c) -> auto& { return c.load_weights; }, "--load-weights",
       "Start from the weights of this file (written by --save-weights, or any checkpoint with weights)", {}, true},
      {"model", "classes", +[](RunConfig& c) -> auto& { return c.classes; }, "--classes",
       "Classes of a zoo model (default: the data set's)"},
      {"model", "sync_batch_norm", +[](RunConfig& c) -> auto& { return c.sync_batch_norm; }, "--sync-batch-norm",
       "Synchronized BatchNorm: training normalises with the statistics of the global batch (an allreduce per "
       "BatchNorm layer forward and backward), not of each rank's samples; running statistics equal on every "
       "rank. A model file's batch_norm layer may say sync = true or false itself, which wins. Refused for a model "
       "without a BatchNorm layer to synchronize", true},
      {"data", "dataset", +[](RunConfig& c) -> auto& { return c.dataset; }, "--dataset",
       "fashion-mnist, mnist, cifar10, synthetic, freedict (English-German sentence pairs), or your own: idx, npy, "
       "image-folder"},
      {"data", "path", +[](RunConfig& c) -> auto& { return c.data_path; }, "--data-path",
       "Data set directory (default: search $TNT_DATA_DIR, /usr/share/datasets, ...)", {}, true},
      {"data", "labels_path", +[](RunConfig& c) -> auto& { return c.labels_path; }, "--labels-path",
       "idx / npy: the training labels file", {}, true},
      {"data", "test_path", +[](RunConfig& c) -> auto& { return c.test_path; }, "--test-path",
       "idx / npy / image-folder: the test images, features or folder (none: no test split)", {}, true},
      {"data", "test_labels_path", +[](RunConfig& c) -> auto& { return c.test_labels_path; }, "--test-labels-path",
       "idx / npy: the test labels file", {}, true},
      {"data", "image_fit", +[](RunConfig& c) -> auto& { return c.image_fit; }, "--image-fit",
       "image-folder: resize (default) or crop images to data.shape"},
      {"data", "decode_threads", +[](RunConfig& c) -> auto& { return c.decode_threads; }, "--decode-threads",
       "Threads reading (decoding) each training batch, ahead of compute (default 1)"},
      {"data", "train_size", +[](RunConfig& c) -> auto& { return c.train_size; }, "--train-size",
       "Training samples (first N; synthetic: required)"},
      {"data", "test_size", +[](RunConfig& c) -> auto& { return c.test_size; }, "--test-size",
       "Test samples (first N; synthetic: 0 = no test split)"},
      {"data", "shape", +[](RunConfig& c) -> auto& { return c.shape; }, "--shape",
       "Sample shape C H W: synthetic data, and what image-folder images become (default 3 32 32)"},
      {"data", "classes", +[](RunConfig& c) -> auto& { return c.num_classes; }, "--num-classes", "Synthetic classes"},
      {"data", "seed", +[](RunConfig& c) -> auto& { return c.data_seed; }},
      {"data", "mean", +[](RunConfig& c) -> auto& { return c.mean; }},
      {"data", "std", +[](RunConfig& c) -> auto& { return c.std; }},
      {"data", "crop_padding", +[](RunConfig& c) -> auto& { return c.crop_padding; }},
      {"data", "horizontal_flip", +[](RunConfig& c) -> auto& { return c.horizontal_flip; }},
      {"data", "prefetch", +[](RunConfig& c) -> auto& { return c.prefetch; }},
      {"train", "loss", +[](RunConfig& c) -> auto& { return c.loss; }, "--loss",
       "sparse_categorical_crossentropy (default), binary_crossentropy or mean_squared_error"},
      {"train", "metrics", +[](RunConfig& c) -> auto& { return c.metrics; }},
      {"data", "max_chars", +[](RunConfig& c) -> auto& { return c.max_chars; }, "--max-chars",
       "Sentence pairs: drop pairs with a side longer than this (code points)"},
      {"data", "tokenizer", +[](RunConfig& c) -> auto& { return c.tokenizer; }, "--tokenizer",
       "Sentence pairs: char or bpe (learned from the training split)"},
      {"data", "merges", +[](RunConfig& c) -> auto& { return c.merges; }},
      {"data", "bucket_batches", +[](RunConfig& c) -> auto& { return c.bucket_batches; }},
      {"train", "global_batch", +[](RunConfig& c) -> auto& { return c.global_batch; }, "--global-batch",
       "Global batch size, split across ranks at sample level"},
      {"train", "micro_batch", +[](RunConfig& c) -> auto& { return c.micro_batch; }, "--micro-batch",
       "Per-rank batch size instead (global = micro x ranks)"},
      {"train", "accumulation_steps", +[](RunConfig& c) -> auto& { return c.accumulation_steps; }, "--accumulate",
       "Gradient accumulation: each rank runs its share of a step as N micro-steps of global batch / (ranks x N) "
       "samples and the optimizer steps once (default 1; BatchNorm sees the smaller micro-steps)"},
      {"train", "reproducible", +[](RunConfig& c) -> auto& { return c.reproducible; }, "--reproducible",
       "none (default) or bitwise (also --bitwise): the final weights are bitwise the same on 1 to bitwise_shards "
       "ranks for the same seed, global batch and --threads (required); each global batch is cut into fixed "
       "shards summed exactly. Refused with BatchNorm, --accumulate, --micro-batch, bf16 gradients, sentence pairs"},
      {"train", "bitwise_shards", +[](RunConfig& c) -> auto& { return c.bitwise_shards; }, "--bitwise-shards",
       "Bitwise-reproducible mode: shards per global batch, the most ranks it runs on (default 0: the smallest "
       "divisor of the global batch from 12 on, so that shards have one size)"},
      {"train", "shard_optimizer", +[](RunConfig& c) -> auto& { return c.shard_optimizer; }, "--shard-optimizer",
       "Optimizer-state sharding (ZeRO stage 1): gradients are reduce-scattered, each rank updates its 1/ranks of "
       "the parameters with its part of the optimizer state, the weights are allgathered; checkpoints hold the "
       "whole state. Refused for plain SGD, with clipnorm and with bf16 gradient compression; no-op on one rank",
       true},
      {"train", "epochs", +[](RunConfig& c) -> auto& { return c.epochs; }, "--epochs", "Epochs"},
      {"train", "max_steps", +[](RunConfig& c) -> auto& { return c.max_steps; }, "--max-steps",
       "Stop after this many optimizer steps in all (0 = no limit)"},
      {"train", "validation_frequency", +[](RunConfig& c) -> auto& { return c.validation_frequency; },
       "--validation-frequency", "Validate on the test split every N epochs (0 = never)"},
      {"train", "eval_batch", +[](RunConfig& c) -> auto& { return c.eval_batch; }, "--eval-batch",
       "Batch size for evaluation"},
      {"train", "seed", +[](RunConfig& c) -> auto& { return c.seed; }, "--seed",
       "Seed of the weights and the data order"},
      {"train", "threads", +[](RunConfig& c) -> auto& { return c.threads; }, "--threads",
       "Compute threads per rank (oneDNN/OpenMP); 0 (default): one per core of the rank's affinity mask, "
       "shared among the host's ranks where they were not bound apart"},
      {"train", "precision", +[](RunConfig& c) -> auto& { return c.precision; }, "--precision",
       "fp32 (default) or bf16: convolutions and Dense layers on bf16 dot products, weights and "
       "gradients in fp32; refused where the CPU has no native bf16 (AVX512-BF16 or AMX)"},
      {"train", "drop_remainder", +[](RunConfig& c) -> auto& { return c.drop_remainder; }},
      {"train", "label_smoothing", +[](RunConfig& c) -> auto& { return c.label_smoothing; }},
      {"optimizer", "kind", +[](RunConfig& c) -> auto& { return c.optimizer.kind; }, "--optimizer",
       "sgd, adam, adamw, rmsprop or adagrad"},
      {"optimizer", "momentum", +[](RunConfig& c) -> auto& { return c.optimizer.momentum; }, "--momentum",
       "SGD/RMSprop momentum"},
      {"optimizer", "nesterov", +[](RunConfig& c) -> auto& { return c.optimizer.nesterov; }},
      {"optimizer", "weight_decay", +[](RunConfig& c) -> auto& { return c.optimizer.weight_decay; }, "--weight-decay",
       "Weight decay"},
      {"optimizer", "beta1", +[](RunConfig& c) -> auto& { return c.optimizer.beta1; }},
      {"optimizer", "beta2", +[](RunConfig& c) -> auto& { return c.optimizer.beta2; }},
      {"optimizer", "epsilon", +[](RunConfig& c) -> auto& { return c.optimizer.epsilon; }},
      {"optimizer", "rho", +[](RunConfig& c) -> auto& { return c.optimizer.rho; }},
      {"optimizer", "initial_accumulator", +[](RunConfig& c) -> auto& { return c.optimizer.initial_accumulator; }},
      {"optimizer", "clipnorm", +[](RunConfig& c) -> auto& { return c.optimizer.clipnorm; }},
      {"optimizer", "global_clipnorm", +[](RunConfig& c) -> auto& { return c.optimizer.global_clipnorm; }},
      {"optimizer", "clipvalue", +[](RunConfig& c) -> auto& { return c.optimizer.clipvalue; }},
      {"schedule", "kind", +[](RunConfig& c) -> auto& { return c.schedule.kind; }, "--schedule",
       "constant, piecewise, exponential or inverse_sqrt"},
      {"schedule", "learning_rate", +[](RunConfig& c) -> auto& { return c.schedule.base_rate; }, "--learning-rate",
       "Base learning rate"},
      {"schedule", "warmup_steps", +[](RunConfig& c) -> auto& { return c.schedule.warmup_steps; }, "--warmup-steps",
       "Linear learning-rate warm-up steps"},
      {"schedule", "boundaries", +[](RunConfig& c) -> auto& { return c.schedule.boundaries; }},
      {"schedule", "values", +[](RunConfig& c) -> auto& { return c.schedule.values; }},
      {"schedule", "decay_rate", +[](RunConfig& c) -> auto& { return c.schedule.decay_rate; }},
      {"schedule", "decay_steps", +[](RunConfig& c) -> auto& { return c.schedule.decay_steps; }},
      {"schedule", "staircase", +[](RunConfig& c) -> auto& { return c.schedule.staircase; }},
      {"schedule", "scale_with_ranks", +[](RunConfig& c) -> auto& { return c.scale_rate_with_ranks; }},
      {"distribution", "distribute_dataset", +[](RunConfig& c) -> auto& { return c.distribute_dataset; },
       "--no-distribute-dataset", "Each rank trains on its own data ({rank} in data.path is the rank): a "
       "micro-batch from each rank's data per step, global batch = micro-batch x ranks", false},
      {"distribution", "distribute_validation_dataset",
       +[](RunConfig& c) -> auto& { return c.distribute_validation_dataset; }, "--no-distribute-validation-dataset",
       "Each rank evaluates its own test data ({rank} in data.test_path is the rank); figures summed over ranks",
       false},
      {"distribution", "fusion_threshold_kb", +[](RunConfig& c) -> auto& { return c.fusion_threshold_kb; },
       "--fusion-threshold", "Gradient bucket size in KiB (default: TNT_FUSION_THRESHOLD_KB, else 32)"},
      {"distribution", "overlap", +[](RunConfig& c) -> auto& { return c.overlap; }, "--no-overlap",
       "Start the allreduces only after backward has finished (for measurements)", false},
      {"distribution", "gradient_compression", +[](RunConfig& c) -> auto& { return c.gradient_compression; },
       "--gradient-compression", "none (default) or bf16: gradient buckets go over the wire as bfloat16 (half the "
       "bytes), summed in fp32; weights, optimizer state and update stay fp32"},
      {"distribution", "transport", +[](RunConfig& c) -> auto& { return c.transport; }, "--transport",
       "tcp or ib (sets TNT_TRANSPORT; tnt-launch sets it too)"},
      {"checkpoint", "path", +[](RunConfig& c) -> auto& { return c.checkpoint_path; }, "--checkpoint",
       "Checkpoint file (written by the master rank, atomically)"},
      {"checkpoint", "every_epochs", +[](RunConfig& c) -> auto& { return c.checkpoint_every_epochs; },
       "--checkpoint-every-epochs", "Write the checkpoint every N epochs"},
      {"checkpoint", "every_steps", +[](RunConfig& c) -> auto& { return c.checkpoint_every_steps; },
       "--checkpoint-every-steps", "Write the checkpoint every N optimizer steps"},
      {"checkpoint", "resume", +[](RunConfig& c) -> auto& { return c.resume; }, "--resume",
       "Continue from this checkpoint (weights, optimizer state, data position, learning-rate factor, the "
       "callbacks' states); auto: "
       "from the checkpoint path when a checkpoint is there, else start fresh"},
      {"callbacks.terminate_on_nan", "enabled", +[](RunConfig& c) -> auto& { return c.terminate_on_nan; },
       "--allow-nan", "Train on when the loss or the reduced gradient is NaN or infinite (by default every rank "
       "stops at that step, naming it, and tnt-train exits 1)", false},
      // Keras's callbacks (tnt/trainer/callbacks.h): a section switches its callback on.
#define TNT_CB(section, key, member) \
      {"callbacks." #section, #key, +[](RunConfig& c) -> auto& { return c.callbacks.section.member; }}
      TNT_CB(early_stopping, enabled, enabled), TNT_CB(early_stopping, monitor, monitor),
      TNT_CB(early_stopping, mode, mode), TNT_CB(early_stopping, min_delta, min_delta),
      TNT_CB(early_stopping, patience, patience), TNT_CB(early_stopping, baseline, baseline),
      TNT_CB(early_stopping, restore_best_weights, restore_best_weights),
      TNT_CB(early_stopping, start_from_epoch, start_from_epoch),
      TNT_CB(reduce_lr_on_plateau, enabled, enabled), TNT_CB(reduce_lr_on_plateau, monitor, monitor),
      TNT_CB(reduce_lr_on_plateau, mode, mode), TNT_CB(reduce_lr_on_plateau, factor, factor),
      TNT_CB(reduce_lr_on_plateau, patience, patience), TNT_CB(reduce_lr_on_plateau, min_delta, min_delta),
      TNT_CB(reduce_lr_on_plateau, cooldown, cooldown), TNT_CB(reduce_lr_on_plateau, min_lr, min_lr),
      TNT_CB(model_checkpoint, enabled, enabled), TNT_CB(model_checkpoint, monitor, monitor),
      TNT_CB(model_checkpoint, mode, mode), TNT_CB(model_checkpoint, save_best_only, save_best_only),
      TNT_CB(model_checkpoint, save_weights_only, save_weights_only), TNT_CB(model_checkpoint, every_epochs, every_epochs),
      TNT_CB(model_checkpoint, initial_value_threshold, initial_value_threshold),
      TNT_CB(model_checkpoint, filepath, filepath),
      TNT_CB(tensorboard, enabled, enabled), TNT_CB(tensorboard, update_freq, update_freq),
      TNT_CB(tensorboard, log_dir, log_dir),
      TNT_CB(remote_monitor, enabled, enabled), TNT_CB(remote_monitor, url, url), TNT_CB(remote_monitor, field, field),
      TNT_CB(remote_monitor, send_as_json, send_as_json), TNT_CB(remote_monitor, timeout, timeout),
      TNT_CB(csv_logger, enabled, enabled), TNT_CB(csv_logger, filename, filename),
      TNT_CB(csv_logger, separator, separator), TNT_CB(csv_logger, append, append),
      TNT_CB(learning_rate_scheduler, enabled, enabled), TNT_CB(learning_rate_scheduler, rates, rates),
#undef TNT_CB
      {"output", "csv", +[](RunConfig& c) -> auto& { return c.csv; }, "--csv", "Per-epoch metrics as CSV"},
      {"output", "timeline", +[](RunConfig& c) -> auto& { return c.timeline; }, "--timeline",
       "Chrome-trace JSON (Perfetto) of every rank's compute, bucket and allreduce spans"},
      {"output", "progress", +[](RunConfig& c) -> auto& { return c.progress; }, "--no-progress", "No progress bar",
       false},
      {"output", "save_weights", +[](RunConfig& c) -> auto& { return c.save_weights; }, "--save-weights",
       "After training, write the weights (no optimizer state) to this file (master rank)"},
      {"output", "save_architecture", +[](RunConfig& c) -> auto& { return c.save_architecture; },
       "--save-architecture", "Write the model's architecture (no weights) to this file (master rank)"},
      {"output", "print_steps", +[](RunConfig& c) -> auto& { return c.print_steps; }, "--print-steps",
       "Print every step's loss and accuracy (summed over all ranks)", true},
      {"translate", "beam", +[](RunConfig& c) -> auto& { return c.beam; }, "--beam",
       "Sentence pairs: beam width of decoding (1 = greedy)"},
      {"translate", "sentences", +[](RunConfig& c) -> auto& { return c.translate_sentences; }, "--translate-sentences",
       "Sentence pairs: test pairs decoded and scored after training (0 = none)"},
      {"translate", "examples", +[](RunConfig& c) -> auto& { return c.translate_examples; }},
  };
// clang-format on
return keys;
}

namespace {

// Reads every key of the table that the file (after --set) has; unknown sections and keys,
// and values of the wrong type, are errors naming the file and key.
void read_keys(const toml::table& root, RunConfig& c, const std::string& path) {
  const Reader r{c.origin};
  std::map<std::string, std::set<std::string>> known;
  for (const auto& k : run_keys()) known[k.section].insert(k.key);
  // Every table the file may have, with what it may hold: a dotted section's outer tables hold
  // only their known inner tables.
  auto tables = known;
  for (const auto& [section, keys] : known) {
    for (std::string inner = section; inner.find('.') != std::string::npos;) {
      const auto dot = inner.rfind('.');
      tables[inner.substr(0, dot)].insert(inner.substr(dot + 1));
      inner = inner.substr(0, dot);
    }
  }
  for (const auto& [key, value] : root) {
    if (!tables.count(std::string(key.str()))) {
      std::string sections;
      for (const auto& [name, keys] : known) sections += (sections.empty() ? "" : ", ") + name;
      throw ConfigError(fmt::format("{}: unknown section or key '{}' (sections: {})", path, key.str(), sections));
    }
  }
  for (const auto& [name, allowed] : tables) r.table(root, name, allowed);
  for (const auto& entry : known) {
    // Not a structured binding: the lambda below uses `section`, which clang 14 (the fuzz and
    // sanitizer builds) cannot capture from a binding.
    const std::string& section = entry.first;
    const toml::table* t = r.table(root, section, tables.at(section));
    if (!t) continue;
    for (const auto& k : run_keys()) {
      if (section != k.section || !t->get(k.key)) continue;
      c.given.emplace(section + "." + k.key, SettingSource::run_file);
      if (k.path) {
        std::string value;
        r.get(t, section, k.key, value);
        std::get<Field<std::string>>(k.field)(c) = resolve_path(path, value);
      } else {
        std::visit([&](auto field) { r.read(t, section, k.key, field(c)); }, k.field);
      }
    }
  }
}

// The run file's table (empty: settings only) with `settings` applied, as a RunConfig.
RunConfig config_from_table(toml::table root, const std::string& path, const std::vector<std::string>& settings) {
  apply_settings(root, settings);
  RunConfig c;
  c.origin = path.empty() ? "--set" : path;
  read_keys(root, c, path);
  for (const auto& setting : settings) {
    // apply_settings has checked the form section.key=value.
    c.given[setting.substr(0, setting.find('='))] = SettingSource::command_line;
  }
  // A callback's section switches it on unless it says `enabled = false`.
  for (const auto& name : callback_sections()) {
    const toml::table* t = root.at_path("callbacks." + name).as_table();
    if (t && !t->contains("enabled")) enable_callback(c.callbacks, name);
  }
  return c;
}

}  // namespace

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& settings) {
  if (path.empty()) return config_from_table({}, path, settings);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) throw ConfigError(fmt::format("cannot read run file '{}'", path));
  return parse_run_config(text.str(), path, settings);
}

RunConfig parse_run_config(std::string_view text, const std::string& origin, const std::vector<std::string>& settings) {
  check_toml_key_depth(text, origin);
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(origin));
  } catch (const toml::parse_error& e) {
    throw ConfigError(
        fmt::format("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column, e.description()));
  }
  return config_from_table(std::move(root), origin, settings);
}

// Note [Distribution switches] in trainer_io.cpp: "{rank}" in a path names each rank's own data,
// which only makes sense when that data is not distributed.
static void check_rank_paths(const RunConfig& c) {
  const auto has = [](const std::string& p) { return p.find(kRankPlaceholder) != std::string::npos; };
  if (c.distribute_dataset && (has(c.data_path) || has(c.labels_path))) {
    throw ConfigError(
        fmt::format("data.path / data.labels_path contain {}: each rank reading its own training data needs "
                    "distribution.distribute_dataset = false (--no-distribute-dataset)",
                    kRankPlaceholder));
  }
  if (c.distribute_validation_dataset && (has(c.test_path) || has(c.test_labels_path))) {
    throw ConfigError(
        fmt::format("data.test_path / data.test_labels_path contain {}: each rank reading its own test data needs "
                    "distribution.distribute_validation_dataset = false (--no-distribute-validation-dataset)",
                    kRankPlaceholder));
  }
}

std::string with_rank(std::string path, int rank) {
  for (auto at = path.find(kRankPlaceholder); at != std::string::npos; at = path.find(kRankPlaceholder, at)) {
    const auto r = std::to_string(rank);
    path.replace(at, std::string_view(kRankPlaceholder).size(), r);
    at += r.size();
  }
  return path;
}

void validate(const RunConfig& c) {
  auto bad = [](const std::string& what) { throw ConfigError(what); };
  if (c.global_batch == 0 && c.micro_batch == 0)
    bad("give a global batch size (--global-batch) or a micro-batch size (--micro-batch)");
  if (c.epochs == 0) bad("epochs must be at least 1");
  if (c.accumulation_steps == 0) bad("train.accumulation_steps (--accumulate) must be at least 1");
  if (c.threads < 0) bad("train.threads (--threads) must be at least 1, or 0 for one per core");
  if (c.reproducible != "none" && c.reproducible != "bitwise") {
    bad(fmt::format("train.reproducible (--reproducible) '{}': expected none or bitwise", c.reproducible));
  }
  if (c.reproducible == "bitwise" && c.threads == 0) {
    bad("train.reproducible = \"bitwise\" (--bitwise) needs train.threads (--threads) set: with 0 the threads "
        "follow the cores each rank gets, which change with the ranks, and oneDNN's sums change with the threads");
  }
  if (c.reproducible == "bitwise" && c.scale_rate_with_ranks) {
    bad("train.reproducible = \"bitwise\" (--bitwise) is refused with schedule.scale_with_ranks = true: the "
        "learning rate would change with the ranks");
  }
  if (compute::parse_precision(c.precision, "train.precision (--precision)") == compute::Precision::bf16) {
    if (const std::string why = compute::bf16_unsupported_reason(); !why.empty()) {
      bad("train.precision bf16 (--precision bf16) is refused: " + why);
    }
  }
  if (c.eval_batch == 0) bad("eval_batch must be at least 1");
  parse_gradient_compression(c.gradient_compression, "distribution.gradient_compression (--gradient-compression)");
  if (!c.transport.empty() && c.transport != "tcp" && c.transport != "ib") {
    bad(fmt::format("transport '{}': expected tcp or ib", c.transport));
  }
  if (c.mean.size() != c.std.size()) bad("data.mean and data.std need the same number of values");
  data::SourceKind kind{};
  try {
    if (!is_sentence_pairs(c)) kind = data::parse_source_kind(c.dataset);
    data::parse_image_fit(c.image_fit);
  } catch (const tnt::DataError& e) {
    bad(e.what());
  }
  if ((kind == data::SourceKind::idx || kind == data::SourceKind::npy) &&
      (c.data_path.empty() || c.labels_path.empty() || (!c.test_path.empty() && c.test_labels_path.empty()))) {
    bad(
        fmt::format("data set '{}' needs data.path and data.labels_path (--data-path, --labels-path), and "
                    "data.test_labels_path with data.test_path",
                    c.dataset));
  }
  if (kind == data::SourceKind::image_folder) {
    if (c.data_path.empty()) bad("an image-folder data set needs data.path (--data-path): ROOT/CLASS/IMAGE.png");
    if (c.shape.size() != 3 || c.shape[0] < 1 || c.shape[1] < 1 || c.shape[2] < 1) {
      bad("data.shape must be [channels, height, width] (what the images are decoded to)");
    }
  }
  if (c.decode_threads < 1) bad("data.decode_threads must be at least 1");
  if (c.dataset == "synthetic") {
    if (c.shape.size() != 3) bad("data.shape must be [channels, height, width]");
    for (auto d : c.shape)
      if (d <= 0) bad("data.shape values must be positive");
    if (c.train_size == 0) bad("a synthetic data set needs data.train_size (--train-size)");
    if (c.num_classes < 2) bad("a synthetic data set needs at least 2 classes");
  }
  check_rank_paths(c);
  if (is_sentence_pairs(c)) {
    if (c.tokenizer != "char" && c.tokenizer != "bpe")
      bad(fmt::format("data.tokenizer '{}': expected char or bpe", c.tokenizer));
    if (c.beam < 1) bad("translate.beam must be at least 1");
    if (!(c.label_smoothing >= 0.0 && c.label_smoothing < 1.0)) bad("train.label_smoothing must be in [0, 1)");
  }
  if ((c.checkpoint_every_epochs || c.checkpoint_every_steps) && c.checkpoint_path.empty()) {
    bad("checkpoints are asked for but no checkpoint path is given (--checkpoint FILE)");
  }
  if (c.resume == "auto" && c.checkpoint_path.empty()) {
    bad("--resume auto continues from the checkpoint path, and none is given (--checkpoint FILE)");
  }
  const auto& o = c.optimizer;
  if ((o.clipnorm > 0) + (o.global_clipnorm > 0) + (o.clipvalue > 0) > 1) {
    bad("optimizer: give at most one of clipnorm, global_clipnorm and clipvalue");
  }
  validate_callbacks(c);
  check_command_line_settings_used(c);
}

std::string canonical_text(const RunConfig& c) {
  // Only what changes the arithmetic or the order of collectives: paths and output options may
  // differ between ranks.
  std::ostringstream s;
  s << "model=" << c.model << ";onnx=" << c.model_onnx << ";classes=" << c.classes << ";dataset=" << c.dataset
    << ";train_size=" << c.train_size << ";test_size=" << c.test_size << ";image_fit=" << c.image_fit
    << ";loss=" << c.loss << ";metrics=";
  for (const auto& m : c.metrics) s << m << ',';
  s << ";shape=";
  for (auto d : c.shape) s << d << ',';
  s << ";num_classes=" << c.num_classes << ";data_seed=" << c.data_seed << ";global_batch=" << c.global_batch
    << ";micro_batch=" << c.micro_batch << ";accumulation_steps=" << c.accumulation_steps << ";epochs=" << c.epochs
    << ";max_steps=" << c.max_steps << ";validation_frequency=" << c.validation_frequency
    << ";eval_batch=" << c.eval_batch << ";seed=" << c.seed << ";drop_remainder=" << c.drop_remainder
    << ";optimizer=" << c.optimizer.kind << ',' << c.optimizer.momentum << ',' << c.optimizer.nesterov << ','
    << c.optimizer.weight_decay << ",clip=" << c.optimizer.clipnorm << ',' << c.optimizer.global_clipnorm << ','
    << c.optimizer.clipvalue << ";schedule=" << c.schedule.kind << ',' << c.schedule.base_rate << ','
    << c.schedule.warmup_steps << ";scale_with_ranks=" << c.scale_rate_with_ranks
    << ";gradient_compression=" << c.gradient_compression << ";fusion_kb=" << c.fusion_threshold_kb
    << ";overlap=" << c.overlap << ";checkpoint_every=" << c.checkpoint_every_epochs << ',' << c.checkpoint_every_steps
    << ";resume=" << !c.resume.empty() << ";terminate_on_nan=" << c.terminate_on_nan
    << ";distribute=" << c.distribute_dataset << ',' << c.distribute_validation_dataset
    << ";load_weights=" << !c.load_weights.empty() << callbacks_canonical_text(c.callbacks) << ";pairs=" << c.max_chars
    << ',' << c.tokenizer << ',' << c.merges << ',' << c.bucket_batches << ',' << c.label_smoothing
    << ";translate=" << c.beam << ',' << c.translate_sentences;
  s << ";sync_batch_norm=" << c.sync_batch_norm << ";reproducible=" << c.reproducible
    << ";bitwise_shards=" << c.bitwise_shards << ";shard_optimizer=" << c.shard_optimizer;
  return s.str();
}

compute::ModelSpec resolve_model(const RunConfig& c, int data_classes, const data::SampleShape& data_shape) {
  const auto names = compute::zoo::names();
  const int64_t classes = c.classes > 0 ? c.classes : data_classes;
  const compute::Shape input{static_cast<int64_t>(data_shape.channels), static_cast<int64_t>(data_shape.height),
                             static_cast<int64_t>(data_shape.width)};
  compute::ModelSpec spec;
  if (!c.model_onnx.empty()) {
    spec = compute::import_onnx(c.model_onnx).spec;
  } else if (std::find(names.begin(), names.end(), c.model) != names.end()) {
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
    throw ConfigError(fmt::format("model '{}' takes input {} but the data set '{}' gives {}{}",
                                  c.model_onnx.empty() ? c.model : c.model_onnx, compute::to_string(spec.input),
                                  c.dataset, compute::to_string(input),
                                  compute::channels_last_hint(input, spec.input)));
  }
  return spec;
}

void check_training_memory(const compute::ModelSpec& spec, const RunConfig& c, Session& session,
                           std::size_t train_samples) {
  const auto available = available_memory();
  if (!available) return;  // neither /proc/meminfo nor a cgroup says: nothing to compare with
  const auto ranks = static_cast<std::size_t>(session.size());
  const int ranks_here = std::max(1, session.communicator().environment().local_size);
  const std::size_t global_batch =
      std::min(c.micro_batch > 0 ? c.micro_batch * ranks : c.global_batch, std::max(train_samples, ranks));
  const std::size_t micro_steps = std::max<std::size_t>(1, c.accumulation_steps);
  const auto micro_batch = static_cast<int64_t>((global_batch + ranks * micro_steps - 1) / (ranks * micro_steps));
  const auto slots = compute::optimizer_slot_kinds(compile_options(c).optimizer).size();
  const auto need = compute::Model::estimate_training_memory(spec, std::max<int64_t>(1, micro_batch), slots);
  const double share = static_cast<double>(available->bytes) / ranks_here;
  if (need.total() <= share) return;
  constexpr double kMiB = 1 << 20;
  throw ConfigError(fmt::format(
      "model '{}' needs at least {:.0f} MiB to train on this rank ({:.0f} MiB of weights and gradients, {:.0f} MiB of "
      "optimizer state, {:.0f} MiB of layer outputs and their gradients at a micro-batch of {}), but it may take "
      "{:.0f} MiB: {:.0f} MiB available ({}) shared by {} rank(s) on this host. Use a smaller micro-batch or model, "
      "or fewer ranks per host",
      spec.name, need.total() / kMiB, need.parameters / kMiB, need.optimizer / kMiB, need.activations / kMiB,
      micro_batch, share / kMiB, static_cast<double>(available->bytes) / kMiB, available->where, ranks_here));
}

bool is_sentence_pairs(const RunConfig& c) { return c.dataset == "freedict"; }

std::string vocabulary_path(const std::string& checkpoint) { return checkpoint + ".vocab"; }

namespace {

// The first `count` pairs of `source` (0: all), tokenized with the same vocabulary.
std::shared_ptr<const data::SequenceSource> first_pairs(std::shared_ptr<const data::SequenceSource> source,
                                                        std::size_t count) {
  if (count == 0 || count >= source->size()) return source;
  std::vector<data::TextPair> pairs;
  for (std::size_t i = 0; i < count; ++i) pairs.push_back(source->text(i));
  return std::make_shared<const data::SequenceSource>(std::move(pairs), source->shared_vocabulary(),
                                                      fmt::format("first {} of {}", count, source->describe()));
}

Sources make_pairs(const RunConfig& c, const std::string& vocabulary) {
  data::TranslationDataOptions o;
  o.freedict.path = c.data_path;
  o.freedict.max_chars = c.max_chars;
  o.split.seed = c.data_seed;
  o.vocabulary.kind = data::parse_tokenizer_kind(c.tokenizer);
  o.vocabulary.merges = c.merges;
  o.vocabulary_path = vocabulary;
  auto d = data::make_translation_data(o);
  Sources out;
  out.vocabulary = d.vocabulary;
  out.train_pairs = first_pairs(d.train, c.train_size);
  out.validation_pairs = d.validation;
  out.test_pairs = first_pairs(d.test, c.test_size);
  return out;
}

}  // namespace

compute::ModelSpec resolve_sequence_model(const RunConfig& c, const Sources& sources) {
  const auto vocab = static_cast<int64_t>(sources.vocabulary->size());
  // Sources end in </s>, targets start with <s>: one token more than the longest text.
  int64_t longest_source = 1, longest_target = 1;
  for (const auto* s : {&sources.train_pairs, &sources.validation_pairs, &sources.test_pairs}) {
    longest_source = std::max(longest_source, static_cast<int64_t>((*s)->max_source_tokens()) + 1);
    longest_target = std::max(longest_target, static_cast<int64_t>((*s)->max_target_tokens()) + 1);
  }
  if (c.model == "transformer" || c.model == "transformer_tiny") {
    compute::zoo::TransformerOptions o;
    if (c.model == "transformer_tiny") {
      o = {.d_model = 16, .heads = 2, .d_ff = 32, .encoder_layers = 1, .decoder_layers = 1};
    }
    o.vocab = vocab;
    o.max_source_length = longest_source;
    o.max_target_length = longest_target;
    auto spec = compute::zoo::transformer(o);
    spec.name = c.model;
    return spec;
  }
  if (!std::filesystem::exists(c.model)) {
    throw ConfigError(
        fmt::format("model '{}' is neither transformer, transformer_tiny nor an existing model file", c.model));
  }
  auto spec = compute::load_model_toml(c.model);
  if (!spec.is_sequence_to_sequence()) {
    throw ConfigError(fmt::format("model '{}' is not an encoder-decoder; sentence pairs need one", c.model));
  }
  if (spec.input[0] < longest_source || spec.decoder_input[0] < longest_target) {
    throw ConfigError(
        fmt::format("model '{}' takes sources of up to {} and targets of up to {} tokens, the data has "
                    "{} and {} (lower data.max_chars or raise the model's lengths)",
                    c.model, spec.input[0], spec.decoder_input[0], longest_source, longest_target));
  }
  return spec;
}

// The user's own files: the training data at data.path, the test split at data.test_path.
static Sources make_user_sources(const RunConfig& c, data::SourceConfig s) {
  s.labels_path = c.labels_path;
  // idx: 10 classes unless data.classes says otherwise; npy / image-folder: from the data.
  s.num_classes = s.kind == data::SourceKind::idx ? c.num_classes : 0;
  s.shape = {0, 0, 0};  // npy: the file's shape, checked against the model's input by resolve_model
  if (s.kind == data::SourceKind::image_folder) {
    s.shape = {static_cast<std::size_t>(c.shape.at(0)), static_cast<std::size_t>(c.shape.at(1)),
               static_cast<std::size_t>(c.shape.at(2))};
    s.image_fit = data::parse_image_fit(c.image_fit);
  }
  Sources out;
  s.size = c.train_size;
  out.train = data::make_source(s);
  if (!c.test_path.empty()) {
    s.path = c.test_path;
    s.labels_path = c.test_labels_path;
    s.size = c.test_size;
    if (s.kind != data::SourceKind::idx) s.num_classes = out.train->num_classes();
    out.test = data::make_source(s);
  }
  return out;
}

Sources make_sources(const RunConfig& config, int rank, const std::string& vocabulary) {
  if (is_sentence_pairs(config)) return make_pairs(config, vocabulary);
  RunConfig c = config;
  for (auto* path : {&c.data_path, &c.labels_path, &c.test_path, &c.test_labels_path}) *path = with_rank(*path, rank);
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
  if (s.kind == data::SourceKind::idx || s.kind == data::SourceKind::npy || s.kind == data::SourceKind::image_folder) {
    return make_user_sources(c, s);
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

CompileOptions compile_options(const RunConfig& c) {
  CompileOptions o;
  o.optimizer = c.optimizer;
  o.schedule = c.schedule;
  o.scale_rate_with_ranks = c.scale_rate_with_ranks;
  o.loss = c.loss;
  o.metrics = c.metrics;
  if (is_sentence_pairs(c)) o.loss = "sequence_cross_entropy";
  o.label_smoothing = c.label_smoothing;
  return o;
}

FitOptions fit_options(const RunConfig& c, const Sources& sources) {
  FitOptions fit;
  fit.global_batch = c.global_batch;
  fit.micro_batch = c.micro_batch;
  fit.accumulation_steps = c.accumulation_steps;
  fit.sync_batch_norm = c.sync_batch_norm;
  fit.bitwise = c.reproducible == "bitwise";
  fit.bitwise_shards = c.bitwise_shards;
  fit.shard_optimizer = c.shard_optimizer;
  fit.epochs = c.epochs;
  fit.max_steps = c.max_steps;
  fit.seed = c.seed;
  fit.drop_remainder = c.drop_remainder;
  fit.transform = train_transform(c);
  fit.prefetch = c.prefetch;
  fit.data_workers = c.decode_threads;
  fit.validation = c.validation_frequency > 0 ? sources.test : nullptr;
  fit.validation_frequency = c.validation_frequency;
  fit.validation_batch = c.eval_batch;
  fit.validation_transform = eval_transform(c);
  fit.fusion_threshold_bytes = c.fusion_threshold_kb * 1024;
  fit.overlap = c.overlap;
  fit.gradient_compression =
      parse_gradient_compression(c.gradient_compression, "distribution.gradient_compression (--gradient-compression)");
  fit.precision = compute::parse_precision(c.precision);
  fit.checkpoint_path = c.checkpoint_path;
  fit.checkpoint_every_epochs = c.checkpoint_every_epochs;
  fit.checkpoint_every_steps = c.checkpoint_every_steps;
  fit.resume_path = c.resume;
  fit.csv_path = c.csv;
  fit.timeline_path = c.timeline;
  fit.progress_bar = c.progress;
  fit.print_steps = c.print_steps;
  fit.terminate_on_nan = c.terminate_on_nan;
  fit.distribute_dataset = c.distribute_dataset;
  fit.distribute_validation_dataset = c.distribute_validation_dataset;
  fit.stop_on_signals = true;  // tnt-train is preempted as a cluster job is (Note [Preemption])
  fit.bucket_batches = c.bucket_batches;
  fit.sequence_validation = c.validation_frequency > 0 ? sources.validation_pairs : nullptr;
  return fit;
}

}  // namespace tnt::trainer
