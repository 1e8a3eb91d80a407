// fused_bias_relu.cpp: y = relu(x * scale + bias) and its backward on the CPU, against the stable
// ABI only. CUDA: csrc/cuda/fused_bias_relu.cu. The custom_ops version:
// ../../csrc/fused_bias_relu.cpp.

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <tuple>

#include "checks.h"

namespace custom_ops_stable {
namespace {

Tensor fused_bias_relu_cpu(const Tensor& x_in, const Tensor& bias_in, double scale) {
  check_bias_op(x_in, bias_in, "fused_bias_relu");
  const Tensor x = torch::stable::contiguous(x_in),
               bias = torch::stable::contiguous(bias_in);  // any strides in (checks.h)
  Tensor y = torch::stable::empty_like(x);
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  // Whole rows per task, about 32K elements each: fewer tasks than that cost more to hand out
  // than they save (chapter 2).
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, cols));
  STABLE_DISPATCH_FLOATING_AND_HALF_TYPES(x.scalar_type(), "fused_bias_relu", [&] {
    using opmath_t = opmath_type<scalar_t>;
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    const scalar_t* b = bias.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    const auto s = static_cast<opmath_t>(scale);
    torch::stable::parallel_for(0, rows, grain_rows, [&](int64_t begin, int64_t end) {
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
// custom_ops writes this with at::where and tensor arithmetic, which the stable API does not
// have in 2.11: the masked gradient is a loop here, and the column sums are aten::sum called
// through the dispatcher (torch::stable::sum), the same reduction as custom_ops's .sum(0).
std::tuple<Tensor, Tensor> fused_bias_relu_backward_cpu(const Tensor& grad_y_in, const Tensor& y_in,
                                                        double scale) {
  const char* op = "fused_bias_relu_backward";
  check_floating(y_in, op, "y");
  check_like(y_in, grad_y_in, op, "y", "grad_y");
  check_same_shape(y_in, grad_y_in, op, "y", "grad_y");
  STD_TORCH_CHECK(y_in.dim() >= 1, op, ": y must have at least 1 dimension, got a 0-dim tensor");
  // Contiguous in, so that the results are contiguous too, as the fake kernel promises.
  const Tensor y = torch::stable::contiguous(y_in), grad_y = torch::stable::contiguous(grad_y_in);
  const int64_t cols = y.size(-1);
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  Tensor active_grad = torch::stable::empty(y.sizes(), opmath_dtype(y), std::nullopt, y.device());
  Tensor grad_x = torch::stable::empty_like(y);
  STABLE_DISPATCH_FLOATING_AND_HALF_TYPES(y.scalar_type(), "fused_bias_relu_backward", [&] {
    using acc_t = opmath_type<scalar_t>;
    const scalar_t* g = grad_y.const_data_ptr<scalar_t>();
    const scalar_t* out = y.const_data_ptr<scalar_t>();
    acc_t* active = active_grad.mutable_data_ptr<acc_t>();
    scalar_t* gx = grad_x.mutable_data_ptr<scalar_t>();
    // custom_ops multiplies in the scalar type of its tensors (float for half types), with the
    // double scale rounded to it: the same here, bit for bit.
    const auto s = static_cast<acc_t>(scale);
    torch::stable::parallel_for(0, y.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        active[i] = out[i] <= scalar_t(0) ? acc_t(0) : static_cast<acc_t>(g[i]);
        gx[i] = static_cast<scalar_t>(active[i] * s);
      }
    });
  });
  const int64_t matrix[] = {rows, cols}, dim0[] = {0};
  Tensor grad_bias = torch::stable::sum(torch::stable::reshape(active_grad, matrix), dim0);
  return {grad_x, torch::stable::to(grad_bias, y.scalar_type())};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(custom_ops_stable, CPU, m) {
  m.impl("fused_bias_relu", TORCH_BOX(&fused_bias_relu_cpu));
  m.impl("fused_bias_relu_backward", TORCH_BOX(&fused_bias_relu_backward_cpu));
}

}  // namespace custom_ops_stable
