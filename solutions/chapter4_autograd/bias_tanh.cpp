// Exercise ch4/bias_tanh, reference solution: y = tanh(x + bias) fused, forward and backward as
// CPU loops, joined to autograd by a C++ torch::autograd::Function. Statement: chapter 4's lesson,
// "Exercises". Check it: make check EX=ch4/bias_tanh SOLUTION=1
//
//   x (..., C) seen as rows x C, bias (C,):   y[r, c] = tanh(x[r, c] + bias[c])
//   grad_x[r, c] = grad_y[r, c] (1 - y[r, c]^2)      grad_bias[c] = sum over r of grad_x[r, c]

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

// torch::autograd::Function, without the whole C++ frontend that <torch/extension.h> brings.
#include <torch/csrc/autograd/custom_function.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// TODO 1 (solved): rows in parallel, each element computed in opmath_t and rounded once.
template <typename scalar_t>
void bias_tanh_forward_cpu(const scalar_t* x, const scalar_t* bias, scalar_t* y, int64_t rows,
                           int64_t cols) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, cols));
  at::parallel_for(0, rows, grain_rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const opmath_t z = static_cast<opmath_t>(x[i]) + static_cast<opmath_t>(bias[c]);
        y[i] = static_cast<scalar_t>(std::tanh(z));
      }
    }
  });
}

// TODO 2 (solved): columns in parallel. Each task owns a block of columns and walks every row in
// order, so each bias element is summed by one thread, always in the same order: no atomics, no
// partial sums to combine, the same bits on every run. The sums stay in opmath_t until the end:
// in float16, 2048 + 1 rounds back to 2048.
template <typename scalar_t>
void bias_tanh_backward_cpu(const scalar_t* grad_y, const scalar_t* y, scalar_t* grad_x,
                            scalar_t* grad_bias, int64_t rows, int64_t cols) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t grain_cols = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, rows));
  at::parallel_for(0, cols, grain_cols, [&](int64_t begin, int64_t end) {
    std::vector<opmath_t> sums(end - begin, opmath_t(0));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = begin; c < end; ++c) {
        const int64_t i = r * cols + c;
        const opmath_t out = static_cast<opmath_t>(y[i]);
        const opmath_t grad = static_cast<opmath_t>(grad_y[i]) * (opmath_t(1) - out * out);
        if (grad_x != nullptr) grad_x[i] = static_cast<scalar_t>(grad);
        sums[c - begin] += grad;
      }
    }
    if (grad_bias != nullptr) {
      for (int64_t c = begin; c < end; ++c) grad_bias[c] = static_cast<scalar_t>(sums[c - begin]);
    }
  });
}

class BiasTanh : public torch::autograd::Function<BiasTanh> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& bias_in) {
    const at::Tensor x = x_in.contiguous();
    const at::Tensor bias = bias_in.contiguous();
    at::Tensor y = at::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "bias_tanh", [&] {
      bias_tanh_forward_cpu<scalar_t>(x.const_data_ptr<scalar_t>(), bias.const_data_ptr<scalar_t>(),
                                      y.mutable_data_ptr<scalar_t>(), rows, cols);
    });
    // TODO 3 (solved): y, not x. tanh' = 1 - tanh^2 is a function of the output, so y is all the
    // backward needs; x would also need bias and a tanh per element again, and x + bias is never
    // stored. And the next layer keeps y alive anyway: saving it costs no memory.
    ctx->save_for_backward({y});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    // The loops below are invisible to autograd: refuse a graph of this backward rather than
    // return one that silently lacks them (autograd_cpp.cpp does the same).
    TORCH_CHECK(!(at::GradMode::is_enabled() && grad_outputs[0].requires_grad()),
                "bias_tanh: double backward is not implemented (its backward is a loop autograd "
                "cannot see into)");
    // The gradient of y.sum() is one number expanded to y's shape (stride 0): the loop wants rows.
    const at::Tensor grad_y = grad_outputs[0].contiguous();
    // TODO 4 (solved): allocate only the gradients asked for; the loop skips a null pointer, and
    // autograd wants an undefined tensor for an input that needs no gradient.
    const at::Tensor y = ctx->get_saved_variables()[0];
    const int64_t cols = y.size(-1);
    const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
    at::Tensor grad_x, grad_bias;
    if (ctx->needs_input_grad(0)) grad_x = at::empty_like(y);
    if (ctx->needs_input_grad(1)) grad_bias = at::empty({cols}, y.options());
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "bias_tanh", [&] {
      bias_tanh_backward_cpu<scalar_t>(
          grad_y.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
          grad_x.defined() ? grad_x.mutable_data_ptr<scalar_t>() : nullptr,
          grad_bias.defined() ? grad_bias.mutable_data_ptr<scalar_t>() : nullptr, rows, cols);
    });
    return {grad_x, grad_bias};
  }
};

at::Tensor bias_tanh(const at::Tensor& x, const at::Tensor& bias) {
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "bias_tanh: x must be a floating-point tensor (float32, float64, float16 or "
              "bfloat16), got ",
              x.scalar_type());
  TORCH_CHECK(x.scalar_type() == bias.scalar_type(),
              "bias_tanh: x and bias must have the same dtype, got ", x.scalar_type(), " and ",
              bias.scalar_type());
  TORCH_CHECK(x.is_cpu() && bias.is_cpu(),
              "bias_tanh: x and bias must be CPU tensors (this exercise's loops run on the CPU), "
              "got ",
              x.device(), " and ", bias.device());
  TORCH_CHECK(x.dim() >= 1, "bias_tanh: x must have at least 1 dimension, got a 0-dim tensor");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), "bias_tanh: bias must have shape (",
              x.size(-1), ",) to match x.size(-1), got ", bias.sizes());
  return BiasTanh::apply(x, bias);
}

}  // namespace

// The op as torch.ops.ch4_bias_tanh.bias_tanh (chapter 5 explains TORCH_LIBRARY; here it is only a
// way in). A def() with a function is a CompositeImplicitAutograd kernel: it runs with autograd
// on, so BiasTanh::apply records its node.
TORCH_LIBRARY(ch4_bias_tanh, m) { m.def("bias_tanh(Tensor x, Tensor bias) -> Tensor", &bias_tanh); }
