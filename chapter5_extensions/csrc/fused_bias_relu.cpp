// fused_bias_relu.cpp: y = relu(x * scale + bias) and its backward on the CPU (chapters 2 and
// 4). CUDA: csrc/cuda/fused_bias_relu.cu. Both compute half types in float.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "checks.h"

namespace custom_ops {
namespace {

at::Tensor fused_bias_relu_cpu(const at::Tensor& x_in, const at::Tensor& bias_in, double scale) {
  check_bias_op(x_in, bias_in, "fused_bias_relu");
  const at::Tensor x = x_in.contiguous(), bias = bias_in.contiguous();  // any strides in (checks.h)
  at::Tensor y = at::empty(x.sizes(), x.options());
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  // Whole rows per task, about 32K elements each: fewer tasks than that cost more to hand out
  // than they save (chapter 2).
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, cols));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        const scalar_t* in = x.const_data_ptr<scalar_t>();
        const scalar_t* b = bias.const_data_ptr<scalar_t>();
        scalar_t* out = y.mutable_data_ptr<scalar_t>();
        const auto s = static_cast<opmath_t>(scale);
        at::parallel_for(0, rows, grain_rows, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
              const opmath_t v =
                  static_cast<opmath_t>(in[r * cols + c]) * s + static_cast<opmath_t>(b[c]);
              out[r * cols + c] = static_cast<scalar_t>(v < opmath_t(0) ? opmath_t(0) : v);
            }
          }
        });
      });
  return y;
}

// grad_x = grad_y * scale * [y not <= 0];  grad_bias = column sums of grad_y * [y not <= 0].
std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward_cpu(const at::Tensor& grad_y_in,
                                                                const at::Tensor& y_in,
                                                                double scale) {
  const char* op = "fused_bias_relu_backward";
  check_floating(y_in, op, "y");
  check_like(y_in, grad_y_in, op, "y", "grad_y");
  check_same_shape(y_in, grad_y_in, op, "y", "grad_y");
  TORCH_CHECK(y_in.dim() >= 1, op, ": y must have at least 1 dimension, got a 0-dim tensor");
  // Contiguous in, so that the results are contiguous too, as the fake kernel promises.
  const at::Tensor y = y_in.contiguous(), grad_y = grad_y_in.contiguous();
  const auto acc = opmath_dtype(y);
  const at::Tensor active_grad =
      at::where(y <= 0, at::zeros({}, y.options().dtype(acc)), grad_y.to(acc));
  const int64_t cols = y.size(-1);
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  return {(active_grad * scale).to(y.scalar_type()),
          active_grad.reshape({rows, cols}).sum(0).to(y.scalar_type())};
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) {
  m.impl("fused_bias_relu", &fused_bias_relu_cpu);
  m.impl("fused_bias_relu_backward", &fused_bias_relu_backward_cpu);
}

}  // namespace custom_ops
