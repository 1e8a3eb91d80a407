// conv_rnn.h: conv_rnn's input checks, shared by the CPU (conv_rnn.cpp) and CUDA (cuda/conv_rnn.cu)
// kernels so that both refuse the same inputs with the same messages.
#pragma once

#include <ATen/ATen.h>

namespace custom_ops {

void check_conv_rnn(const at::Tensor& x, const at::Tensor& kernel, const at::Tensor& hidden);

}  // namespace custom_ops
