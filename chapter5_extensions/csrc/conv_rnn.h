// conv_rnn.h: conv_rnn's and conv_rnn_backward's input checks, shared by the CPU (conv_rnn.cpp)
// and CUDA (cuda/conv_rnn.cu) kernels so that both refuse the same inputs with the same messages.
#pragma once

#include <ATen/core/Tensor.h>

namespace custom_ops {

// Both return the kernel's number of taps K. The kernel is (K,) or a conv1d weight's (1, 1, K).
int64_t check_conv_rnn(const at::Tensor& x, const at::Tensor& kernel, const at::Tensor& hidden);
int64_t check_conv_rnn_backward(const at::Tensor& grad_out, const at::Tensor& out,
                                const at::Tensor& kernel, const at::Tensor& hidden);

}  // namespace custom_ops
