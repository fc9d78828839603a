// tnt-trainer-seq2seq-probe CHECKPOINT [STEPS]: trains the tiny Transformer (dropout on) for
// STEPS (default 30) optimizer steps on synthetic sentence pairs of unequal lengths, global
// batch 10 (not divisible by 3; the last batch of the 47 pairs has 7), one step line per step,
// and writes a full checkpoint. Run under tnt-launch with 1, 2 and 3 ranks it must give the
// same weights up to float summation order, and twice on the same ranks the same bits
// (trainer.seq2seq_reproducibility). Then it translates two of the sources greedily and with a
// beam of 3, the same on every rank. With a third argument, `bitwise`, it asks for the
// bitwise-reproducible mode, which refuses sentence pairs (trainer.bitwise_sequences_refused).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"
#include "tnt/dataset/sequence.h"
#include "tnt/trainer/trainer.h"

namespace {

// Pairs whose target is a function of the source: words from a small list, the target
// reversed word by word and suffixed, so sources and targets have different lengths.
std::vector<tnt::data::TextPair> pairs() {
  const char* words[] = {"dog", "cat", "house", "good", "morning", "tree", "water", "red", "small"};
  std::vector<tnt::data::TextPair> out;
  for (int i = 0; i < 47; ++i) {
    std::string source = words[i % 9];
    if (i % 3 != 0) source += std::string(" ") + words[(i * 5 + 1) % 9];
    if (i % 4 == 1) source += std::string(" ") + words[(i * 7 + 2) % 9];
    std::string target(source.rbegin(), source.rend());
    out.push_back({source, target + (i % 2 == 0 ? "en" : "")});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4 || (argc == 4 && std::string(argv[3]) != "bitwise")) {
    std::fprintf(stderr, "usage: %s CHECKPOINT [STEPS [bitwise]]\n", argv[0]);
    return 2;
  }
  try {
    const std::size_t steps = argc >= 3 ? std::strtoul(argv[2], nullptr, 10) : 30;
    auto texts = tnt::data::vocabulary_texts(pairs());
    auto vocabulary = std::make_shared<const tnt::data::Vocabulary>(tnt::data::Vocabulary::learn(texts, {}));
    auto source = std::make_shared<const tnt::data::SequenceSource>(pairs(), vocabulary, "probe pairs");
    tnt::trainer::Session session;
    tnt::trainer::Trainer trainer(session,
                                  tnt::compute::zoo::transformer_tiny(static_cast<int64_t>(vocabulary->size())));
    trainer.initialize(11);
    tnt::trainer::CompileOptions compile;
    compile.optimizer.kind = "adam";
    compile.schedule.base_rate = 3e-3;
    compile.loss = "sequence_cross_entropy";
    compile.label_smoothing = 0.1;
    trainer.compile(compile);
    tnt::trainer::FitOptions options;
    options.global_batch = 10;
    options.epochs = 100;
    options.max_steps = steps;
    options.seed = 5;
    options.checkpoint_path = argv[1];
    options.progress_bar = false;
    options.print_steps = true;
    options.bucket_batches = 2;
    options.bitwise = argc == 4;
    trainer.fit(source, options);
    const std::vector<std::string> probe{"good dog", "red tree"};
    for (long beam : {1L, 3L}) {
      const auto out = trainer.translate(probe, *vocabulary, {.beam = beam});
      if (session.is_master_rank()) {
        fmt::print("beam {}: '{}' -> '{}', '{}' -> '{}'\n", beam, probe[0], out[0], probe[1], out[1]);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seq2seq probe: %s\n", e.what());
    return tnt::exit_status_of(e);
  }
}
