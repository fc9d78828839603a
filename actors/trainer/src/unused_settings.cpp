// Note [Unused settings]: a key that the run's other settings make meaningless is never dropped
// without a word (issue 26, item 7). Tried as a new user would, `tnt-train
// conf/lenet5_fashion_mnist.toml --learning-rate 0.5` trained bitwise the same as without the
// option: the file's piecewise schedule takes its rates from schedule.values. Each rule below
// names a key and the setting that makes it meaningless. A key given on the command line (an
// option or --set) is refused, exit 2: the user asked for something this run cannot do. A key
// that only the run file gives is a warning: the file may serve several runs (a shipped file's
// Adam betas stay in it when the user switches to --optimizer sgd), and there is no way to
// remove a file's key from the command line. Settings that other checks already refuse (two
// clipping modes, checkpoints without a path, the learning-rate callback with a schedule) are
// not repeated here.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "run_config.h"
#include "tnt/core/error.h"

namespace tnt::trainer {
namespace {

struct UnusedRule {
  std::vector<const char*> keys;  // "section.key"
  // Empty when the keys are used; else the setting that makes them meaningless, and why.
  std::function<std::string(const RunConfig&)> unused_because;
};

bool one_of(const std::string& value, std::initializer_list<const char*> list) {
  return std::any_of(list.begin(), list.end(), [&](const char* v) { return value == v; });
}

std::string unless(bool used, const std::string& why) { return used ? std::string() : why; }

const std::vector<UnusedRule>& unused_rules() {
  static const std::vector<UnusedRule> rules{
      {{"schedule.learning_rate"},
       [](const RunConfig& c) {
         return unless(c.schedule.kind != "piecewise",
                       "schedule.kind = \"piecewise\" takes every rate from schedule.values (give those, "
                       "e.g. --set 'schedule.values=[0.5, 0.1]', or --schedule constant)");
       }},
      {{"schedule.learning_rate"},
       [](const RunConfig& c) {
         return unless(!c.callbacks.learning_rate_scheduler.enabled,
                       "[callbacks.learning_rate_scheduler] sets every epoch's rate from its rates");
       }},
      {{"schedule.boundaries", "schedule.values"},
       [](const RunConfig& c) {
         return unless(c.schedule.kind == "piecewise",
                       fmt::format("schedule.kind is \"{}\"; only \"piecewise\" uses them", c.schedule.kind));
       }},
      {{"schedule.decay_rate", "schedule.decay_steps", "schedule.staircase"},
       [](const RunConfig& c) {
         return unless(c.schedule.kind == "exponential",
                       fmt::format("schedule.kind is \"{}\"; only \"exponential\" uses them", c.schedule.kind));
       }},
      {{"train.bitwise_shards"},
       [](const RunConfig& c) {
         return unless(c.reproducible == "bitwise",
                       "train.reproducible is not \"bitwise\" (--bitwise): only the bitwise-reproducible mode cuts "
                       "batches into shards");
       }},
      {{"optimizer.momentum"},
       [](const RunConfig& c) {
         return unless(one_of(c.optimizer.kind, {"sgd", "rmsprop"}),
                       fmt::format("optimizer.kind is \"{}\"; only sgd and rmsprop have momentum", c.optimizer.kind));
       }},
      {{"optimizer.nesterov"},
       [](const RunConfig& c) {
         return unless(c.optimizer.kind == "sgd",
                       fmt::format("optimizer.kind is \"{}\"; only sgd uses it", c.optimizer.kind));
       }},
      {{"optimizer.nesterov"},
       [](const RunConfig& c) {
         return unless(!c.optimizer.nesterov || c.optimizer.momentum > 0,
                       "optimizer.momentum is 0: Nesterov momentum without momentum is plain SGD");
       }},
      {{"optimizer.beta1", "optimizer.beta2"},
       [](const RunConfig& c) {
         return unless(one_of(c.optimizer.kind, {"adam", "adamw"}),
                       fmt::format("optimizer.kind is \"{}\"; only adam and adamw use them", c.optimizer.kind));
       }},
      {{"optimizer.epsilon"},
       [](const RunConfig& c) {
         return unless(c.optimizer.kind != "sgd", "optimizer.kind is \"sgd\", which has no epsilon");
       }},
      {{"optimizer.rho"},
       [](const RunConfig& c) {
         return unless(c.optimizer.kind == "rmsprop",
                       fmt::format("optimizer.kind is \"{}\"; only rmsprop uses it", c.optimizer.kind));
       }},
      {{"optimizer.initial_accumulator"},
       [](const RunConfig& c) {
         return unless(c.optimizer.kind == "adagrad",
                       fmt::format("optimizer.kind is \"{}\"; only adagrad uses it", c.optimizer.kind));
       }},
      {{"data.labels_path", "data.test_labels_path"},
       [](const RunConfig& c) {
         return unless(one_of(c.dataset, {"idx", "npy"}),
                       fmt::format("data.dataset is \"{}\"; only idx and npy read labels files", c.dataset));
       }},
      {{"data.test_path"},
       [](const RunConfig& c) {
         return unless(
             one_of(c.dataset, {"idx", "npy", "image-folder"}),
             fmt::format("data.dataset is \"{}\", whose test split is found with its training data", c.dataset));
       }},
      {{"data.image_fit"},
       [](const RunConfig& c) {
         return unless(c.dataset == "image-folder",
                       fmt::format("data.dataset is \"{}\"; only image-folder resizes images", c.dataset));
       }},
      {{"data.shape"},
       [](const RunConfig& c) {
         return unless(one_of(c.dataset, {"synthetic", "image-folder"}),
                       fmt::format("data.dataset is \"{}\", whose samples have their own shape", c.dataset));
       }},
      {{"data.classes"},
       [](const RunConfig& c) {
         return unless(one_of(c.dataset, {"synthetic", "idx"}),
                       fmt::format("data.dataset is \"{}\", which has its own classes (model.classes sizes a "
                                   "zoo model's output)",
                                   c.dataset));
       }},
      {{"data.seed"},
       [](const RunConfig& c) {
         return unless(one_of(c.dataset, {"synthetic", "freedict"}),
                       fmt::format("data.dataset is \"{}\"; only synthetic data and the sentence pairs' split "
                                   "use a data seed (train.seed orders the samples)",
                                   c.dataset));
       }},
      {{"data.max_chars", "data.tokenizer", "data.merges", "data.bucket_batches", "train.label_smoothing",
        "translate.beam", "translate.sentences", "translate.examples"},
       [](const RunConfig& c) {
         return unless(is_sentence_pairs(c), fmt::format("data.dataset is \"{}\"; only sentence pairs (freedict) "
                                                         "use it",
                                                         c.dataset));
       }},
      {{"data.merges"},
       [](const RunConfig& c) {
         return unless(c.tokenizer == "bpe", "data.tokenizer is \"char\"; only bpe learns merges");
       }},
      {{"train.loss"},
       [](const RunConfig& c) {
         return unless(!is_sentence_pairs(c),
                       "data.dataset is \"freedict\": sentence pairs train on the token cross-entropy "
                       "(train.label_smoothing smooths it)");
       }},
      {{"data.mean", "data.std", "data.crop_padding", "data.horizontal_flip", "data.decode_threads", "data.prefetch"},
       [](const RunConfig& c) {
         return unless(!is_sentence_pairs(c),
                       "data.dataset is \"freedict\": sentence pairs are token ids, built in memory without image "
                       "transforms or decoding threads");
       }},
      {{"model.classes"},
       [](const RunConfig& c) {
         return unless(one_of(c.model, {"lenet5", "mlp", "resnet20", "resnet50"}),
                       fmt::format("model \"{}\" is not an image zoo model: its output size is its own", c.model));
       }},
      {{"model.load_weights"},
       [](const RunConfig& c) {
         return unless(c.resume.empty() || c.resume == "auto",
                       "checkpoint.resume names a checkpoint, whose weights replace them");
       }},
  };
  return rules;
}

std::string described(const std::string& key) {
  for (const auto& k : run_keys()) {
    if (k.option && key == std::string(k.section) + "." + k.key) return fmt::format("{} ({})", key, k.option);
  }
  return key;
}

// Calls `report(key, source, why)` for every given key that the run does not use.
template <class Report>
void for_each_unused(const RunConfig& c, Report report) {
  for (const auto& rule : unused_rules()) {
    for (const char* key : rule.keys) {
      const auto given = c.given.find(key);
      if (given == c.given.end()) continue;
      const std::string why = rule.unused_because(c);
      if (!why.empty()) report(given->first, given->second, why);
    }
  }
}

}  // namespace

void check_command_line_settings_used(const RunConfig& c) {
  for_each_unused(c, [](const std::string& key, SettingSource source, const std::string& why) {
    if (source == SettingSource::command_line) {
      throw ConfigError(fmt::format("{} is given but not used: {}", described(key), why));
    }
  });
}

std::vector<std::string> unused_file_settings(const RunConfig& c) {
  std::vector<std::string> lines;
  for_each_unused(c, [&](const std::string& key, SettingSource source, const std::string& why) {
    if (source == SettingSource::run_file) {
      lines.push_back(fmt::format("{}: {} is not used: {}", c.origin, described(key), why));
    }
  });
  return lines;
}

}  // namespace tnt::trainer
