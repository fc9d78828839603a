// Greedy decoding and beam search (decode.h). Every step runs the whole
// model on the prefixes decoded so far: simple, and exact, since the causal
// mask makes position t's output independent of everything after it. Its
// cost grows with the square of the output length; for the short sentences
// of the translation tutorial that is a few tens of decoder passes.
#include "tnt/compute/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

struct Hypothesis {
  std::vector<int32_t> tokens;  // without bos and eos
  double score = 0.0;           // sum of token log-probabilities
};

struct Candidate {
  size_t hypothesis;
  int32_t token;
  double score;
};

double normalised(const Hypothesis& h, double penalty, bool ended) {
  const double length = static_cast<double>(h.tokens.size()) + (ended ? 1.0 : 0.0);
  return h.score / std::pow(std::max(length, 1.0), penalty);
}

// One decoding pass over a chunk of sentences: the state of each sentence's beam.
class BeamChunk {
 public:
  BeamChunk(Model& model, const std::vector<std::vector<int32_t>>& sources, const DecodeOptions& options)
      : model_(model), sources_(sources), o_(options), active_(sources.size()), ended_(sources.size()) {
    for (auto& a : active_) {
      a.push_back({});
    }
  }

  std::vector<std::vector<int32_t>> run(int64_t max_tokens) {
    for (int64_t t = 0; t < max_tokens; ++t) {
      if (!step(t)) {
        break;
      }
    }
    std::vector<std::vector<int32_t>> out;
    for (size_t s = 0; s < sources_.size(); ++s) {
      out.push_back(best(s));
    }
    return out;
  }

 private:
  // Extends every active hypothesis by one token; false once none is left.
  bool step(int64_t t) {
    std::vector<std::pair<size_t, size_t>> rows;  // (sentence, hypothesis)
    for (size_t s = 0; s < active_.size(); ++s) {
      for (size_t h = 0; h < active_[s].size(); ++h) {
        rows.emplace_back(s, h);
      }
    }
    if (rows.empty()) {
      return false;
    }
    const Tensor& logits = run_model(rows, t);
    const int64_t vocab = logits.dim(2), length = logits.dim(1);
    std::vector<std::vector<Candidate>> candidates(active_.size());
    std::vector<double> logp(static_cast<size_t>(vocab));
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto [s, h] = rows[r];
      const float* z = logits.data() + (static_cast<int64_t>(r) * length + t) * vocab;
      const double top = *std::max_element(z, z + vocab);
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) {
        sum += std::exp(static_cast<double>(z[v]) - top);
      }
      const double log_sum = top + std::log(sum);
      for (int64_t v = 0; v < vocab; ++v) {
        candidates[s].push_back({h, static_cast<int32_t>(v), active_[s][h].score + z[v] - log_sum});
      }
    }
    const auto beam = static_cast<size_t>(o_.beam);
    for (size_t s = 0; s < active_.size(); ++s) {
      auto& c = candidates[s];
      const size_t keep = std::min(c.size(), 2 * beam);
      // Ties go to the earlier hypothesis and the smaller token: deterministic.
      std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep), c.end(),
                        [](const Candidate& a, const Candidate& b) {
                          if (a.score != b.score) return a.score > b.score;
                          if (a.hypothesis != b.hypothesis) return a.hypothesis < b.hypothesis;
                          return a.token < b.token;
                        });
      std::vector<Hypothesis> next;
      for (size_t i = 0; i < keep && next.size() < beam && ended_[s].size() < beam; ++i) {
        Hypothesis h{active_[s][c[i].hypothesis].tokens, c[i].score};
        if (c[i].token == o_.eos) {
          ended_[s].push_back(std::move(h));
        } else {
          h.tokens.push_back(c[i].token);
          next.push_back(std::move(h));
        }
      }
      active_[s] = ended_[s].size() >= beam ? std::vector<Hypothesis>{} : std::move(next);
    }
    return true;
  }

  // Logits {rows, t + 1, vocab} for the rows' prefixes <s> y_1 .. y_t.
  const Tensor& run_model(const std::vector<std::pair<size_t, size_t>>& rows, int64_t t) {
    const auto n = static_cast<int64_t>(rows.size());
    int64_t source_length = 1;
    for (const auto& [s, h] : rows) {
      source_length = std::max(source_length, static_cast<int64_t>(sources_[s].size()));
    }
    source_.resize({n, source_length});
    target_.resize({n, t + 1});
    source_lengths_.assign(static_cast<size_t>(n), 0);
    target_lengths_.assign(static_cast<size_t>(n), static_cast<int32_t>(t + 1));
    for (int64_t r = 0; r < n; ++r) {
      const auto [s, h] = rows[static_cast<size_t>(r)];
      const auto& src = sources_[s];
      for (int64_t i = 0; i < source_length; ++i) {
        source_[r * source_length + i] =
            static_cast<float>(i < static_cast<int64_t>(src.size()) ? src[static_cast<size_t>(i)] : o_.pad);
      }
      source_lengths_[static_cast<size_t>(r)] = static_cast<int32_t>(src.size());
      target_[r * (t + 1)] = static_cast<float>(o_.bos);
      const auto& tokens = active_[s][h].tokens;
      for (int64_t i = 0; i < t; ++i) {
        target_[r * (t + 1) + i + 1] = static_cast<float>(tokens[static_cast<size_t>(i)]);
      }
    }
    return model_.forward(source_, target_, Mode::inference, BatchInfo{0, 0, source_lengths_, target_lengths_});
  }

  std::vector<int32_t> best(size_t s) const {
    const bool ended = !ended_[s].empty();
    const auto& pool = ended ? ended_[s] : active_[s];
    if (pool.empty()) {
      return {};
    }
    const Hypothesis* best = &pool.front();
    for (const auto& h : pool) {
      if (normalised(h, o_.length_penalty, ended) > normalised(*best, o_.length_penalty, ended)) {
        best = &h;
      }
    }
    return best->tokens;
  }

  Model& model_;
  const std::vector<std::vector<int32_t>>& sources_;
  const DecodeOptions& o_;
  std::vector<std::vector<Hypothesis>> active_, ended_;
  Tensor source_, target_;
  std::vector<int32_t> source_lengths_, target_lengths_;
};

}  // namespace

std::vector<std::vector<int32_t>> decode(Model& model, const std::vector<std::vector<int32_t>>& sources,
                                         const DecodeOptions& options) {
  const ModelSpec& spec = model.spec();
  if (!spec.is_sequence_to_sequence()) {
    throw ConfigError("decode: model '" + spec.name + "' is not an encoder-decoder");
  }
  if (options.beam < 1 || options.batch < 1 || options.max_tokens < 0) {
    throw ConfigError("decode: beam and batch must be >= 1 and max_tokens >= 0");
  }
  const int64_t longest = spec.decoder_input[0];
  const int64_t max_tokens = options.max_tokens == 0 ? longest : std::min(options.max_tokens, longest);
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto n = static_cast<int64_t>(sources[i].size());
    if (n < 1 || n > spec.input[0]) {
      throw ConfigError("decode: source " + std::to_string(i) + " has " + std::to_string(n) + " tokens; model '" +
                        spec.name + "' takes 1 to " + std::to_string(spec.input[0]));
    }
  }
  std::vector<std::vector<int32_t>> out;
  const auto chunk = static_cast<size_t>(std::max<int64_t>(1, options.batch / options.beam));
  for (size_t first = 0; first < sources.size(); first += chunk) {
    const std::vector<std::vector<int32_t>> part(
        sources.begin() + static_cast<std::ptrdiff_t>(first),
        sources.begin() + static_cast<std::ptrdiff_t>(std::min(sources.size(), first + chunk)));
    for (auto& tokens : BeamChunk(model, part, options).run(max_tokens)) {
      out.push_back(std::move(tokens));
    }
  }
  return out;
}

}  // namespace tnt::compute
