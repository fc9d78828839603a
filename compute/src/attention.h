#pragma once
// Multi-head scaled dot-product attention (Vaswani et al. 2017, section 3.2)
// with its four projections. It takes its two inputs explicitly, so the
// self-attention layer (query = memory = the Chain's input) and an
// encoder-decoder attention node of a model graph (query from the decoder,
// memory from the encoder) share it.
//
// Note [Attention kernels]: projections are oneDNN inner products over all
// positions; scores S = Q K^T / sqrt(d_head), the weighted sum P V and all
// four backward products are batched oneDNN matmuls over {batch, head} whose
// operands are strided views of the {N, T, heads * d_head} projection
// buffers, so heads are never copied out. The softmax is oneDNN's; its
// backward is compute/'s own loop (oneDNN 2.6 has only reference code for it
// on AVX2). Masked scores are set to -1e30 before the softmax and their
// probabilities to exactly 0 after it, so a padded key gets no weight and no
// gradient at all (Note [Sequence padding] in model.h); a causal mask lets
// query t see keys 0..t only.
#include <cstdint>
#include <span>
#include <vector>

#include "sequence_ops.h"

namespace tnt::compute::detail {

class MultiHeadAttention {
 public:
  struct Weights {  // each {weight, bias (nullptr: none)}
    Parameter *query_weight, *query_bias, *key_weight, *key_bias, *value_weight, *value_bias, *output_weight,
        *output_bias;
  };
  void configure(int64_t model_dim, int64_t heads, bool causal, const Weights& weights);
  int64_t model_dim() const { return dim_; }
  // Primitives for `batch` samples, queries of length query_length, memory of length key_length.
  void prepare(int64_t batch, int64_t query_length, int64_t key_length, Precision precision);
  // query {B, Tq, D}, memory {B, Tk, D} (the same pointer for self-attention),
  // y {B, Tq, D}. key_lengths: B real memory lengths in [1, Tk], or empty.
  // The inputs must stay unchanged until backward().
  void forward(const float* query, const float* memory, std::span<const int32_t> key_lengths, float* y);
  // Overwrites the eight parameter gradients; writes d_query {B, Tq, D} and
  // d_memory {B, Tk, D} where not null. For self-attention the input gradient
  // is their sum.
  void backward(const float* dy, float* d_query, float* d_memory);
  // Note [Roofline] in layer.h: the four projections and the two products
  // per head, at the prepared sizes; backward does each twice (the gradients
  // of both operands).
  LayerCost cost(bool backward) const;

 private:
  void apply_mask(std::span<const int32_t> key_lengths, bool after_softmax);
  void softmax_backward();

  int64_t dim_ = 0, heads_ = 0, head_dim_ = 0;
  bool causal_ = false;
  int64_t batch_ = 0, tq_ = 0, tk_ = 0;
  Precision precision_ = Precision::fp32;
  RowDense query_, key_, value_, output_;
  Parameter* key_bias_ = nullptr;  // Note [Key bias] in attention.cpp
  MatMul scores_, weighted_, d_probs_, d_value_, d_query_, d_key_;
  dnnl::memory::desc probs_md_;
  dnnl::softmax_forward softmax_;
  const float* query_in_ = nullptr;
  const float* memory_in_ = nullptr;
  std::vector<float> q_, k_, v_, probs_, heads_out_;
  std::vector<float> d_heads_out_, d_probs_buf_, d_scores_, dq_, dk_, dv_, scratch_;
};

}  // namespace tnt::compute::detail
