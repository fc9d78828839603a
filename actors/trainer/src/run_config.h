#pragma once
// A tnt-train run: what a conf/*.toml file holds, after command-line overrides.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "run_callbacks.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/schedule.h"
#include "tnt/compute/spec.h"
#include "tnt/dataset/source.h"
#include "tnt/dataset/transform.h"
#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

// Where a run key's value came from (Note [Unused settings] in unused_settings.cpp).
enum class SettingSource { run_file, command_line };

struct RunConfig {
  std::string origin;  // the file it came from (relative paths are resolved against its folder)
  // "section.key" of every key the run file, --set or an option gave; the others hold defaults.
  std::map<std::string, SettingSource> given;

  // [model]: a zoo name ("lenet5", "mlp", "resnet20", "resnet50") or a model TOML file.
  std::string model = "lenet5";
  int64_t classes = 0;           // zoo models: number of classes (0 = the data set's)
  std::string model_onnx;        // an ONNX file to train, its initializers the initial weights
  std::string load_weights;      // start from these weights (Trainer::load_weights)
  bool sync_batch_norm = false;  // BatchNorm statistics over the global batch (FitOptions)

  // [data]
  // fashion-mnist | mnist | cifar10 | synthetic | freedict (sentence pairs), or the user's own: idx | npy |
  // image-folder
  std::string dataset = "fashion-mnist";
  std::string data_path;    // empty: search (dataset/README.md); idx / npy / image-folder: the training data
  std::string labels_path;  // idx / npy: the training labels
  std::string test_path, test_labels_path;  // idx / npy / image-folder: the test split (empty: none)
  std::string image_fit = "resize";         // image-folder: resize | crop
  std::size_t decode_threads = 1;           // threads reading each training batch
  std::size_t train_size = 0;               // 0: all (synthetic: required)
  std::size_t test_size = 0;                // 0: all (synthetic: 0 = no test split)
  std::vector<int64_t> shape{3, 32, 32};    // synthetic; image-folder: what images are decoded to
  int num_classes = 10;                     // synthetic only
  uint64_t data_seed = 1;                   // synthetic only
  std::vector<double> mean, std;            // normalisation (empty: none)
  std::size_t crop_padding = 0;
  bool horizontal_flip = false;
  std::size_t prefetch = 2;
  // Sentence pairs (dataset = "freedict": English-German, dataset/README.md). train_size and
  // test_size keep the first pairs of those splits; data.seed seeds the split by headword.
  std::size_t max_chars = 48;      // pairs with a longer side are dropped
  std::string tokenizer = "char";  // char | bpe
  std::size_t merges = 1000;       // bpe
  std::size_t bucket_batches = 0;  // length bucketing over runs of this many global batches

  // [train]
  std::string loss = "sparse_categorical_crossentropy";
  std::vector<std::string> metrics{"accuracy"};
  std::size_t global_batch = 0, micro_batch = 0;
  std::size_t accumulation_steps = 1;  // micro-steps per optimizer step (FitOptions)
  std::string reproducible = "none";   // none | bitwise (FitOptions::bitwise)
  std::size_t bitwise_shards = 0;      // FitOptions::bitwise_shards (0: automatic)
  bool shard_optimizer = false;        // optimizer-state sharding, ZeRO stage 1 (FitOptions)
  std::size_t epochs = 1;
  std::size_t max_steps = 0;
  std::size_t validation_frequency = 1;  // epochs; 0 = no validation
  std::size_t eval_batch = 1000;
  uint64_t seed = 42;
  int threads = 0;                 // 0: one per core (Note [Threads follow the cores] in trainer.cpp)
  std::string precision = "fp32";  // fp32 | bf16 (Note [Mixed precision] in tnt/compute/runtime.h)
  bool drop_remainder = false;
  double label_smoothing = 0.0;  // sequence loss

  compute::OptimizerOptions optimizer;  // [optimizer]
  compute::ScheduleOptions schedule;    // [schedule] (learning_rate = base_rate)
  bool scale_rate_with_ranks = false;

  // [distribution]
  std::size_t fusion_threshold_kb = 0;  // 0: TNT_FUSION_THRESHOLD_KB, else 32
  bool overlap = true;
  std::string gradient_compression = "none";  // none | bf16 (FitOptions::gradient_compression)
  std::string transport;                      // "" | tcp | ib (exported as TNT_TRANSPORT)
  // false: each rank's own data ({rank} in the paths), Note [Distribution switches] (trainer_io.cpp)
  bool distribute_dataset = true, distribute_validation_dataset = true;

  // [checkpoint]
  std::string checkpoint_path;
  std::size_t checkpoint_every_epochs = 0, checkpoint_every_steps = 0;
  std::string resume;

  // [output]
  std::string csv, timeline;
  bool progress = true, print_steps = false;
  std::string save_weights, save_architecture;  // written by the master rank (Trainer::save_*)

  // [callbacks.terminate_on_nan]
  bool terminate_on_nan = true;
  // [translate] (sentence pairs): after training, the master decodes `sentences` spread
  // test pairs and scores them (exact match, chrF) against the copy-the-source baseline.
  std::size_t beam = 1;  // 1 = greedy
  std::size_t translate_sentences = 500;
  std::size_t translate_examples = 8;  // printed with their references

  // [callbacks.early_stopping], [callbacks.tensorboard], ... (run_callbacks.h)
  RunCallbacks callbacks;
};

bool is_sentence_pairs(const RunConfig& config);  // dataset = "freedict"
// The vocabulary saved next to a checkpoint.
std::string vocabulary_path(const std::string& checkpoint);

// Note [Run keys]: every run-file key is one entry of run_keys(): its section and name, the
// RunConfig field it sets, and the command-line option that sets it too (if any, with its
// help). The file reader, the list of known keys, `--set` and tnt-train's options all come
// from that table, so a key is written once. run_keys() is longer than the 80 lines a function
// may have: it is a table, one entry per key, and splitting it would scatter what it gathers.
template <class T>
using Field = T& (*)(RunConfig&);
static_assert(std::is_same_v<std::size_t, uint64_t>, "size_t and uint64_t fields share one reader");
using AnyField =
    std::variant<Field<std::string>, Field<bool>, Field<double>, Field<int>, Field<int64_t>, Field<std::size_t>,
                 Field<std::vector<int64_t>>, Field<std::vector<double>>, Field<std::vector<std::string>>>;

struct RunKey {
  RunKey(const char* section_, const char* key_, AnyField field_, const char* option_ = nullptr,
         const char* help_ = nullptr, std::optional<bool> flag_ = std::nullopt, bool path_ = false)
      : section(section_), key(key_), field(field_), option(option_), help(help_), flag(flag_), path(path_) {}
  const char* section;
  const char* key;
  AnyField field;
  const char* option;  // e.g. "--epochs"; null: run file and --set only
  const char* help;
  // A flag option (no value) that sets a bool field to this value, e.g. --no-overlap.
  std::optional<bool> flag;
  // A path: a relative one is looked for beside the run file if not in the working directory.
  bool path;
};
const std::vector<RunKey>& run_keys();

// Throws ConfigError naming the file and key for unknown keys and wrong types.
// `settings` ("section.key=value", value in TOML syntax: 0.9, true, "adam", [1, 2]) replace or
// add keys of the file before it is read (path may be empty: settings only).
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& settings = {});
// The same from a run file's text; `origin` stands for its path (in messages, and relative paths
// are resolved against its folder). Throws tnt::ConfigError on bad input.
RunConfig parse_run_config(std::string_view text, const std::string& origin,
                           const std::vector<std::string>& settings = {});
// Throws ConfigError for inconsistent settings, and for a setting given on the command line that
// the run's other settings make meaningless (Note [Unused settings]).
void validate(const RunConfig& config);
// Note [Unused settings]: one line per key that the run file gives but the run's other settings
// make meaningless, naming both (tnt-train logs them as warnings on the master).
std::vector<std::string> unused_file_settings(const RunConfig& config);
// Throws ConfigError for a key given on the command line that the run does not use (validate).
void check_command_line_settings_used(const RunConfig& config);
// Canonical text of everything that must agree across ranks (compared at start-up).
std::string canonical_text(const RunConfig& config);

compute::ModelSpec resolve_model(const RunConfig& config, int data_classes, const data::SampleShape& data_shape);
struct Sources {
  std::shared_ptr<const data::Source> train, test;  // test may be null (synthetic, test_size 0)
  // Sentence pairs instead (is_sentence_pairs); train and test above are then null.
  std::shared_ptr<const data::Vocabulary> vocabulary;
  std::shared_ptr<const data::SequenceSource> train_pairs, validation_pairs, test_pairs;
};
// "{rank}" in the data paths is replaced by `rank` (each rank's own data).
inline constexpr const char* kRankPlaceholder = "{rank}";
std::string with_rank(std::string path, int rank);
// `vocabulary` (sentence pairs): load this file instead of learning the vocabulary (evaluating a
// checkpoint).
Sources make_sources(const RunConfig& config, int rank = 0, const std::string& vocabulary = {});
// For sentence pairs: a zoo transformer sized to the vocabulary and the data's longest
// sequences, or the model file as it is.
compute::ModelSpec resolve_sequence_model(const RunConfig& config, const Sources& sources);
// Refuses a model whose training cannot fit in the memory this rank may take (the host's
// available memory shared by its ranks), before anything is allocated: Note [Training memory]
// in compute/src/model.cpp, actors/trainer/README.md. A batch holds at most `train_samples`.
void check_training_memory(const compute::ModelSpec& spec, const RunConfig& config, Session& session,
                           std::size_t train_samples);
data::TransformOptions train_transform(const RunConfig& config);
data::TransformOptions eval_transform(const RunConfig& config);
// What Trainer::compile and Trainer::fit take from a run.
CompileOptions compile_options(const RunConfig& config);
FitOptions fit_options(const RunConfig& config, const Sources& sources);

}  // namespace tnt::trainer
