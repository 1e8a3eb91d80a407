// relu.cpp: custom_ops_stable::relu and its backward on the CPU, against the stable ABI only.
// CUDA: csrc/cuda/relu.cu. The custom_ops version to diff with: ../../csrc/relu.cpp.

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "checks.h"

namespace custom_ops_stable {
namespace {

Tensor relu_cpu(const Tensor& x_in) {
  check_floating(x_in, "relu", "x");
  const Tensor x = torch::stable::contiguous(x_in);  // any strides in (checks.h)
  Tensor y = torch::stable::empty_like(x);
  STABLE_DISPATCH_FLOATING_AND_HALF_TYPES(x.scalar_type(), "relu", [&] {
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    // at::parallel_for's stable twin (2.10+): the same thread pool, reached through the C shim.
    torch::stable::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      // v <= 0 is false for NaN, so NaN passes through as in torch.relu.
      for (int64_t i = begin; i < end; ++i) out[i] = in[i] <= scalar_t(0) ? scalar_t(0) : in[i];
    });
  });
  return y;
}

Tensor relu_backward_cpu(const Tensor& grad_y_in, const Tensor& y_in) {
  const char* op = "relu_backward";
  check_floating(y_in, op, "y");
  check_like(y_in, grad_y_in, op, "y", "grad_y");
  check_same_shape(y_in, grad_y_in, op, "y", "grad_y");
  const Tensor y = torch::stable::contiguous(y_in), grad_y = torch::stable::contiguous(grad_y_in);
  Tensor grad_x = torch::stable::empty_like(y);
  STABLE_DISPATCH_FLOATING_AND_HALF_TYPES(y.scalar_type(), "relu_backward", [&] {
    const scalar_t* g = grad_y.const_data_ptr<scalar_t>();
    const scalar_t* out = y.const_data_ptr<scalar_t>();
    scalar_t* gx = grad_x.mutable_data_ptr<scalar_t>();
    torch::stable::parallel_for(0, y.numel(), 32768, [&](int64_t begin, int64_t end) {
      // Zero where y <= 0, as PyTorch's threshold_backward: a NaN output passes its gradient.
      for (int64_t i = begin; i < end; ++i) gx[i] = out[i] <= scalar_t(0) ? scalar_t(0) : g[i];
    });
  });
  return grad_x;
}

}  // namespace

// TORCH_BOX turns the typed function into the boxed calling convention the C shim registers
// (a stack of StableIValues), the job that m.impl's templates do for TORCH_LIBRARY_IMPL.
STABLE_TORCH_LIBRARY_IMPL(custom_ops_stable, CPU, m) {
  m.impl("relu", TORCH_BOX(&relu_cpu));
  m.impl("relu_backward", TORCH_BOX(&relu_backward_cpu));
}

}  // namespace custom_ops_stable
