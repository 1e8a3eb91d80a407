// relu.cpp: custom_ops::relu and its backward on the CPU. CUDA: csrc/cuda/relu.cu.
// The backward takes the output y, not a mask: y is what autograd saves (ops.py).

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"

namespace custom_ops {
namespace {

at::Tensor relu_cpu(const at::Tensor& x_in) {
  check_floating(x_in, "relu", "x");
  const at::Tensor x = x_in.contiguous();  // any strides in (checks.h)
  at::Tensor y = at::empty(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu", [&] {
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      // v <= 0 is false for NaN, so NaN passes through as in torch.relu.
      for (int64_t i = begin; i < end; ++i) out[i] = in[i] <= scalar_t(0) ? scalar_t(0) : in[i];
    });
  });
  return y;
}

at::Tensor relu_backward_cpu(const at::Tensor& grad_y_in, const at::Tensor& y_in) {
  const char* op = "relu_backward";
  check_floating(y_in, op, "y");
  check_like(y_in, grad_y_in, op, "y", "grad_y");
  check_same_shape(y_in, grad_y_in, op, "y", "grad_y");
  const at::Tensor y = y_in.contiguous(), grad_y = grad_y_in.contiguous();
  at::Tensor grad_x = at::empty(y.sizes(), y.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "relu_backward", [&] {
    const scalar_t* g = grad_y.const_data_ptr<scalar_t>();
    const scalar_t* out = y.const_data_ptr<scalar_t>();
    scalar_t* gx = grad_x.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, y.numel(), 32768, [&](int64_t begin, int64_t end) {
      // Zero where y <= 0, as PyTorch's threshold_backward: a NaN output passes its gradient.
      for (int64_t i = begin; i < end; ++i) gx[i] = out[i] <= scalar_t(0) ? scalar_t(0) : g[i];
    });
  });
  return grad_x;
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) {
  m.impl("relu", &relu_cpu);
  m.impl("relu_backward", &relu_backward_cpu);
}

}  // namespace custom_ops
