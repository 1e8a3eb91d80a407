// ops.h: chapter 4's operators as C++ functions: each checks its inputs, then runs on the tensor's
// device (ops.cpp, lstm_cell.cpp). The Python autograd.Functions (functions.py) and the C++
// autograd::Function (autograd_cpp.cpp) are both built from these.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>
#include <vector>

// y = relu(x) and the mask y > 0 (bool); grad_x = mask ? grad_y : 0.
std::tuple<at::Tensor, at::Tensor> relu_forward(const at::Tensor& x);
at::Tensor relu_backward(const at::Tensor& grad_y, const at::Tensor& mask);

// y = relu(x * scale + bias), bias over the last dimension; the backward needs only the output y:
// grad_x = grad_y * scale * (y > 0), grad_bias = sum over leading dims of grad_y * (y > 0).
// A gradient not asked for is not computed, and comes back undefined (None in Python).
at::Tensor fused_bias_relu_forward(const at::Tensor& x, const at::Tensor& bias, double scale);
std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward(const at::Tensor& grad_y,
                                                            const at::Tensor& y, double scale,
                                                            bool need_grad_x, bool need_grad_bias);

// One LSTM step: {h_next, c_next, gates (activated i, f, g, o), tanh(c_next)}; and its backward:
// {grad_x, grad_h, grad_c, grad_w_ih, grad_w_hh, grad_bias}, each computed only if `needs` says so
// (the same grad_bias serves b_ih and b_hh).
std::vector<at::Tensor> lstm_cell_forward(const at::Tensor& x, const at::Tensor& h,
                                          const at::Tensor& c, const at::Tensor& w_ih,
                                          const at::Tensor& w_hh, const at::Tensor& b_ih,
                                          const at::Tensor& b_hh);
std::vector<at::Tensor> lstm_cell_backward(const at::Tensor& grad_h_next,
                                           const at::Tensor& grad_c_next, const at::Tensor& x,
                                           const at::Tensor& h, const at::Tensor& c,
                                           const at::Tensor& w_ih, const at::Tensor& w_hh,
                                           const at::Tensor& gates, const at::Tensor& tanh_c_next,
                                           const std::vector<bool>& needs);

// The C++ autograd::Function version of fused_bias_relu (autograd_cpp.cpp).
at::Tensor fused_bias_relu_cpp_autograd(const at::Tensor& x, const at::Tensor& bias, double scale);
