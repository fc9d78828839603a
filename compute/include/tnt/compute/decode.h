#pragma once
// Decoding with an encoder-decoder model (Note [Sequence-to-sequence form] in
// spec.h): the decoder is run again and again on its own output, from the
// begin-of-sequence token until every sentence has produced end-of-sequence
// or the model's longest target. Token ids only; the vocabulary that turns
// them into text lives in dataset/.
#include <cstdint>
#include <vector>

#include "tnt/compute/model.h"

namespace tnt::compute {

struct DecodeOptions {
  int32_t pad = 0;  // the token that fills rows of a batch to a common length
  int32_t bos = 1;  // the decoder's first input
  int32_t eos = 2;  // ends a sentence
  // Most tokens to produce, </s> included; 0 = as many as the model's
  // decoder_input T allows (T inputs, <s> included, predict T tokens).
  int64_t max_tokens = 0;
  // 1: greedy (the most probable token at every position); more: beam search
  // keeping this many hypotheses per sentence, scored by the sum of token
  // log-probabilities divided by length^length_penalty.
  int64_t beam = 1;
  double length_penalty = 0.6;
  int64_t batch = 64;  // sentences decoded together
};

// Each source is the encoder's row as training saw it (tokens, then eos;
// 1..decoder length). Returns each sentence's tokens without bos and eos.
// Runs in inference mode; the model's training state is not touched.
std::vector<std::vector<int32_t>> decode(Model& model, const std::vector<std::vector<int32_t>>& sources,
                                         const DecodeOptions& options = {});

}  // namespace tnt::compute
