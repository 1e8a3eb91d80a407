// cuda_ops.h: the CUDA half of chapter 4's ops, as the C++ side sees it. fused_bias_relu.cu and
// lstm_cell.cu define these; ops.cpp calls them for CUDA tensors. Without CUDA (a CPU-only torch
// or no nvcc) load_chapter4.py builds the .cpp files alone and WITH_CUDA stays undefined.
#pragma once

// Declaring these needs at::Tensor only. The .cu files take the current stream from
// <c10/cuda/CUDAStream.h> (c10::cuda::getCurrentCUDAStream, which at::cuda:: re-exports) and the
// GPU's properties from <ATen/cuda/CUDAContextLight.h>: the two things most code includes the
// larger <ATen/cuda/CUDAContext.h> for.
#include <ATen/core/Tensor.h>

#include <tuple>

namespace cuda_ops {

// y = relu(x) and the mask y > 0 (bool), in one pass; grad_x = grad_y where mask, else 0.
std::tuple<at::Tensor, at::Tensor> relu_forward(const at::Tensor& x);
at::Tensor relu_backward(const at::Tensor& grad_y, const at::Tensor& mask);

// y = relu(x * scale + bias); its backward from grad_y and the saved output y. Either gradient
// may be skipped (returned undefined) when autograd does not need it.
at::Tensor fused_bias_relu_forward(const at::Tensor& x, const at::Tensor& bias, double scale);
std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward(const at::Tensor& grad_y,
                                                            const at::Tensor& y, double scale,
                                                            bool need_grad_x, bool need_grad_bias);

// The pointwise part of the LSTM cell's backward: from the gradients of h' and c' and the saved
// activated gates and tanh(c'), the gradient of the pre-activation gates (B, 4H) and of c (B, H).
std::tuple<at::Tensor, at::Tensor> lstm_gates_backward(const at::Tensor& grad_h,
                                                       const at::Tensor& grad_c,
                                                       const at::Tensor& c, const at::Tensor& gates,
                                                       const at::Tensor& tanh_c);

}  // namespace cuda_ops
