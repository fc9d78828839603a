#pragma once
// Scores of translations against references, for the translation tutorial (README,
// "Translation"): exact match and chrF (Popović 2015), the character n-gram F-score that
// suits dictionary entries of one to three words, where BLEU-4 is near 0.
#include <string>
#include <vector>

namespace tnt::trainer {

struct TranslationScores {
  double exact_match = 0.0;  // fraction of hypotheses equal to their reference
  double chrf = 0.0;         // corpus chrF, 0..100
  std::size_t count = 0;
};

// Note [chrF]: character n-grams of orders 1..6 over the code points of each sentence with
// white space removed; per order, matches (clipped counts), hypothesis and reference n-grams are
// summed over the corpus, precision and recall give an F-score with beta = 2 (recall weighs
// twice), and chrF is 100 times the mean F over the orders that occur (sacreBLEU's corpus
// chrF, default settings). hypotheses and references have the same size.
TranslationScores score_translations(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references);

}  // namespace tnt::trainer
