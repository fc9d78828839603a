#pragma once
// oneDNN building blocks of the sequence layers (layers_sequence.cpp,
// attention.cpp). Each works on plain buffers given by the caller, so a layer
// with one input (the Chain's) and a future graph node with several inputs
// (the decoder's encoder-decoder attention) can share them.
#include <cstdint>
#include <string>
#include <vector>

#include "dnnl_util.h"
#include "layer.h"

namespace tnt::compute::detail {

// y {rows, out} = x {rows, in} W^T + b on oneDNN inner products, with W {out,
// in} and b {out} (PyTorch's layout). Rows are every position of every
// sample, so this is the position-wise Dense of a {N, T, in} tensor.
class RowDense {
 public:
  void bind(Parameter* weight, Parameter* bias, int64_t in, int64_t out);
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  // Builds the primitives for `rows` rows (cheap when nothing changed).
  void prepare(int64_t rows, Precision precision);
  void forward(const float* x, float* y);
  // Overwrites the weight and bias gradients; writes dx unless it is null.
  // x is the last forward's input (in bf16 its rounded copy from then is used).
  void backward(const float* x, const float* dy, float* dx);

 private:
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  int64_t in_ = 0, out_ = 0, rows_ = -1;
  Precision precision_ = Precision::fp32;
  // src_, wei_ and diff_dst_ in the compute type; the others f32.
  dnnl::memory::desc x_md_, src_, user_wei_, wei_, dst_, diff_dst_, bias_md_;
  Reorder to_src_, to_wei_, to_diff_dst_;
  bool separate_bias_gradient_ = false;
  BiasGradient bias_gradient_;
  dnnl::inner_product_forward fwd_;
  dnnl::inner_product_backward_data bwd_data_;
  dnnl::inner_product_backward_weights bwd_weights_;
  std::vector<float> x_low_, w_low_, dy_low_;  // bf16 elements, two to a float
};

// C = scale * A B on dnnl::matmul, A {..., M, K}, B {..., K, N}, C {..., M,
// N}: the descriptors carry strides, so transposed or head-interleaved views
// of plain buffers need no copies.
class MatMul {
 public:
  void prepare(const dnnl::memory::desc& a, const dnnl::memory::desc& b, const dnnl::memory::desc& c,
               float scale = 1.0f);
  void run(const float* a, const float* b, float* c) const;
  const std::string& implementation() const { return impl_; }

 private:
  dnnl::memory::desc a_, b_, c_;
  dnnl::matmul primitive_;
  std::string impl_;
};

// A view of plain memory: dims with explicit strides (in elements).
dnnl::memory::desc strided_desc(const Shape& dims, const Shape& strides);

}  // namespace tnt::compute::detail
