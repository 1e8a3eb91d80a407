// lstm_cell.h: the two fused pointwise kernels of the LSTM cell, as lstm_cell.cpp calls them.
// Defined in lstm_cell.cu; in a CPU-only build (USE_CUDA=0) they only raise.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace custom_ops::cuda {

#ifdef WITH_CUDA
// From the products pre (B, 4H) = x W_ih^T + h W_hh^T, the biases b_ih and b_hh (4H) and the
// cell state c (B, H): h_next, c_next, the activated gates [i f g o] and tanh(c_next), in one
// pass that adds the biases too.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstm_pointwise_forward(
    const at::Tensor& pre, const at::Tensor& b_ih, const at::Tensor& b_hh, const at::Tensor& c);

// From the gradients of h_next and c_next (any strides) and what the forward saved: the gradient
// of the pre-activation gates (B, 4H) and of c (B, H), in one pass.
std::tuple<at::Tensor, at::Tensor> lstm_pointwise_backward(const at::Tensor& grad_h,
                                                           const at::Tensor& grad_c,
                                                           const at::Tensor& c,
                                                           const at::Tensor& gates,
                                                           const at::Tensor& tanh_c);
#else
// Never reached: without CUDA no CUDA kernel is registered, so no CUDA tensor gets here.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstm_pointwise_forward(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "lstm_cell: custom_ops was built without CUDA (USE_CUDA=0)");
}
inline std::tuple<at::Tensor, at::Tensor> lstm_pointwise_backward(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "lstm_cell_backward: custom_ops was built without CUDA (USE_CUDA=0)");
}
#endif

}  // namespace custom_ops::cuda
