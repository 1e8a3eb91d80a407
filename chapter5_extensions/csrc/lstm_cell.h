// lstm_cell.h: one LSTM step and its backward (lstm_cell.cpp), as the CPU and CUDA registrations
// call them. A device's fused pointwise kernels are passed in: the CPU registration passes none
// (ATen ops do the pointwise part), csrc/cuda/lstm_cell.cu passes its two kernels. So lstm_cell.cpp
// names no CUDA symbol and compiles to the same object with or without CUDA (setup.py compiles it
// once, in build/objects, for both builds).
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

namespace custom_ops {

// From the products pre (B, 4H) = x W_ih^T + h W_hh^T, the biases b_ih and b_hh (4H) and the cell
// state c (B, H): h_next, c_next, the activated gates [i f g o] and tanh(c_next), in one pass.
using LstmPointwiseForward = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> (*)(
    const at::Tensor& pre, const at::Tensor& b_ih, const at::Tensor& b_hh, const at::Tensor& c);
// From the gradients of h_next and c_next (any strides) and what the forward saved: the gradient
// of the pre-activation gates (B, 4H) and of c (B, H), in one pass.
using LstmPointwiseBackward = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor& grad_h,
                                                                     const at::Tensor& grad_c,
                                                                     const at::Tensor& c,
                                                                     const at::Tensor& gates,
                                                                     const at::Tensor& tanh_c);

// custom_ops::lstm_cell, its pointwise part done by `fused` when given.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstm_cell(
    const at::Tensor& x, const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
    const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh,
    LstmPointwiseForward fused);

// custom_ops::lstm_cell_backward, its pointwise part done by `fused` when given.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
lstm_cell_backward(const at::Tensor& grad_h, const at::Tensor& grad_c, const at::Tensor& x,
                   const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
                   const at::Tensor& w_hh, const at::Tensor& gates, const at::Tensor& tanh_c,
                   std::array<bool, 6> output_mask, LstmPointwiseBackward fused);

}  // namespace custom_ops
