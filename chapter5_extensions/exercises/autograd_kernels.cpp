// Exercise ch5/autograd, given: the ops ch5_autograd::scaled_softsign and its backward, schemas
// and CPU kernels. You write the autograd formula in autograd.py that connects them; nothing here
// is to change. Chapter 5's lesson, "Exercises".
//
//   scaled_softsign(x, scale) = scale * x / (1 + |x|)       x (..., F), scale (F,)
//   d/dx = scale / (1 + |x|)^2        d/dscale = x / (1 + |x|), summed over every row of x

// Per-operator headers instead of <ATen/ATen.h>: this file compiles in about half the time.
#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

namespace ch5_autograd {

// The library's contract, as custom_ops': contiguous inputs, or a message that says so. A hidden
// .contiguous() would cost a copy as large as the op; the caller decides.
void check_contiguous(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (got strides ", t.strides(),
              " for shape ", t.sizes(), "); call .contiguous() first");
}

void check_x_and_scale(const at::Tensor& x, const at::Tensor& scale, const char* op) {
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, op,
              ": x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(scale.scalar_type() == x.scalar_type(), op,
              ": x and scale must have the same dtype, got ", x.scalar_type(), " and ",
              scale.scalar_type());
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-dim tensor");
  TORCH_CHECK(scale.dim() == 1 && scale.size(0) == x.size(-1), op, ": scale must have shape (",
              x.size(-1), ",) to match x.size(-1), got ", scale.sizes());
  check_contiguous(x, op, "x");
  check_contiguous(scale, op, "scale");
}

at::Tensor scaled_softsign_cpu(const at::Tensor& x, const at::Tensor& scale) {
  check_x_and_scale(x, scale, "scaled_softsign");
  at::Tensor y = at::empty_like(x);
  const int64_t features = x.size(-1);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scaled_softsign", [&] {
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    const scalar_t* s = scale.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        out[i] = s[i % features] * in[i] / (scalar_t(1) + std::abs(in[i]));
      }
    });
  });
  return y;
}

// Both gradients in one op, as fused_bias_relu_backward: (grad_x, grad_scale).
std::tuple<at::Tensor, at::Tensor> scaled_softsign_backward_cpu(const at::Tensor& grad_y,
                                                                const at::Tensor& x,
                                                                const at::Tensor& scale) {
  const char* op = "scaled_softsign_backward";
  check_x_and_scale(x, scale, op);
  TORCH_CHECK(grad_y.sizes() == x.sizes() && grad_y.scalar_type() == x.scalar_type(), op,
              ": grad_y must have x's shape and dtype, got ", grad_y.sizes(), " ",
              grad_y.scalar_type(), " for x ", x.sizes(), " ", x.scalar_type());
  check_contiguous(grad_y, op, "grad_y");
  at::Tensor grad_x = at::empty_like(x);
  at::Tensor grad_scale = at::empty_like(scale);
  const int64_t features = x.size(-1);
  const int64_t rows = features == 0 ? 0 : x.numel() / features;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scaled_softsign_backward", [&] {
    using acc_t = at::acc_type<scalar_t, /*is_cuda=*/false>;  // double, for a sum of many rows
    const scalar_t* g = grad_y.const_data_ptr<scalar_t>();
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    const scalar_t* s = scale.const_data_ptr<scalar_t>();
    scalar_t* gx = grad_x.mutable_data_ptr<scalar_t>();
    scalar_t* gs = grad_scale.mutable_data_ptr<scalar_t>();
    // One feature per task: its column sum runs in a fixed order, so grad_scale is deterministic.
    at::parallel_for(0, features, 16, [&](int64_t begin, int64_t end) {
      for (int64_t f = begin; f < end; ++f) {
        acc_t sum = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = r * features + f;
          const scalar_t denominator = scalar_t(1) + std::abs(in[i]);
          gx[i] = g[i] * s[f] / (denominator * denominator);
          sum += static_cast<acc_t>(g[i] * in[i] / denominator);
        }
        gs[f] = static_cast<scalar_t>(sum);
      }
    });
  });
  return {grad_x, grad_scale};
}

}  // namespace ch5_autograd

TORCH_LIBRARY(ch5_autograd, m) {
  m.def("scaled_softsign(Tensor x, Tensor scale) -> Tensor");
  m.def("scaled_softsign_backward(Tensor grad_y, Tensor x, Tensor scale) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(ch5_autograd, CPU, m) {
  m.impl("scaled_softsign", &ch5_autograd::scaled_softsign_cpu);
  m.impl("scaled_softsign_backward", &ch5_autograd::scaled_softsign_backward_cpu);
}
