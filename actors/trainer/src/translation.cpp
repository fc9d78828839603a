#include "tnt/trainer/translation.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "tnt/core/error.h"

namespace tnt::trainer {
namespace {

// The code points of valid UTF-8 as strings, white space left out.
std::vector<std::string_view> characters(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xc0) == 0x80) ++n;
    const std::string_view c = text.substr(i, n);
    if (c != " " && c != "\t" && c != "\n") out.push_back(c);
    i += n;
  }
  return out;
}

std::map<std::string, double> ngrams(const std::vector<std::string_view>& chars, std::size_t order) {
  std::map<std::string, double> out;
  for (std::size_t i = 0; i + order <= chars.size(); ++i) {
    std::string gram;
    for (std::size_t k = 0; k < order; ++k) gram += chars[i + k];
    out[gram] += 1.0;
  }
  return out;
}

}  // namespace

TranslationScores score_translations(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size()) {
    throw LogicError("score_translations: " + std::to_string(hypotheses.size()) + " hypotheses for " +
                     std::to_string(references.size()) + " references");
  }
  constexpr std::size_t kOrders = 6;
  constexpr double kBeta2 = 4.0;  // beta = 2
  double match[kOrders] = {}, hyp[kOrders] = {}, ref[kOrders] = {};
  TranslationScores scores;
  scores.count = hypotheses.size();
  double exact = 0.0;
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    if (hypotheses[s] == references[s]) exact += 1.0;
    const auto h = characters(hypotheses[s]), r = characters(references[s]);
    for (std::size_t n = 1; n <= kOrders; ++n) {
      const auto hn = ngrams(h, n), rn = ngrams(r, n);
      for (const auto& [gram, count] : hn) {
        hyp[n - 1] += count;
        if (const auto it = rn.find(gram); it != rn.end()) match[n - 1] += std::min(count, it->second);
      }
      for (const auto& [gram, count] : rn) ref[n - 1] += count;
    }
  }
  double f_sum = 0.0;
  int orders = 0;
  for (std::size_t n = 0; n < kOrders; ++n) {
    if (hyp[n] == 0.0 || ref[n] == 0.0) continue;
    const double precision = match[n] / hyp[n], recall = match[n] / ref[n];
    const double denominator = kBeta2 * precision + recall;
    f_sum += denominator > 0.0 ? (1.0 + kBeta2) * precision * recall / denominator : 0.0;
    ++orders;
  }
  scores.chrf = orders > 0 ? 100.0 * f_sum / orders : 0.0;
  scores.exact_match = scores.count > 0 ? exact / static_cast<double>(scores.count) : 0.0;
  return scores;
}

}  // namespace tnt::trainer
