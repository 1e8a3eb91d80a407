// relu.cu: custom_ops::relu and its backward for CUDA tensors. CPU: csrc/relu.cpp.

#include <ATen/Dispatch.h>
#include <torch/library.h>

#include "../checks.h"
#include "launch_utils.cuh"

namespace custom_ops::cuda {
namespace {

template <typename scalar_t>
__global__ void relu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
                            int64_t numel) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    const scalar_t v = x[i];
    y[i] = v <= scalar_t(0) ? scalar_t(0) : v;  // NaN passes through, as in torch.relu
  }
}

template <typename scalar_t>
__global__ void relu_backward_kernel(const scalar_t* __restrict__ grad_y,
                                     const scalar_t* __restrict__ y, scalar_t* __restrict__ grad_x,
                                     int64_t numel) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    grad_x[i] = y[i] <= scalar_t(0) ? scalar_t(0) : grad_y[i];
  }
}

at::Tensor relu_cuda(const at::Tensor& x) {
  check_floating(x, "relu", "x");
  check_contiguous(x, "relu", "x");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu", [&] {
    auto kernel = relu_kernel<scalar_t>;
    const int64_t blocks =
        std::min(ceil_div(x.numel(), kThreads), blocks_to_fill_gpu(kernel, kThreads));
    kernel<<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return y;
}

at::Tensor relu_backward_cuda(const at::Tensor& grad_y, const at::Tensor& y) {
  const char* op = "relu_backward";
  check_floating(y, op, "y");
  check_like(y, grad_y, op, "y", "grad_y");
  check_same_shape(y, grad_y, op, "y", "grad_y");
  check_contiguous(y, op, "y");
  check_contiguous(grad_y, op, "grad_y");
  const c10::cuda::CUDAGuard guard(y.device());
  at::Tensor grad_x = at::empty_like(y);
  if (y.numel() == 0) return grad_x;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "relu_backward", [&] {
    auto kernel = relu_backward_kernel<scalar_t>;
    const int64_t blocks =
        std::min(ceil_div(y.numel(), kThreads), blocks_to_fill_gpu(kernel, kThreads));
    kernel<<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        grad_y.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
        grad_x.mutable_data_ptr<scalar_t>(), y.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad_x;
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) {
  m.impl("relu", &relu_cuda);
  m.impl("relu_backward", &relu_backward_cuda);
}

}  // namespace custom_ops::cuda
