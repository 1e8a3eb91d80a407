// Exercise ch4/bias_tanh: y = tanh(x + bias) fused, forward and backward as CPU loops, joined to
// autograd by a C++ torch::autograd::Function. Statement and hints: chapter 4's lesson,
// "Exercises". Write the four TODOs. Check it: make check EX=ch4/bias_tanh  (check_bias_tanh.py)
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

// TODO 1: y[r * cols + c] = tanh(x[r * cols + c] + bias[c]) for every row r and column c, with
// at::parallel_for over the rows (grain: about 32K elements' worth of rows). Compute in opmath_t
// (float for the half types) and round once to scalar_t.
template <typename scalar_t>
void bias_tanh_forward_cpu(const scalar_t* x, const scalar_t* bias, scalar_t* y, int64_t rows,
                           int64_t cols) {
  std::copy(x, x + rows * cols, y);  // replace: this is y = x
}

// TODO 2: for every element, grad = grad_y * (1 - y^2) in opmath_t; store it in grad_x, and add
// it to the sum of its column for grad_bias. Either pointer may be null: skip what it would hold.
// Sum each column in opmath_t (a float16 running sum stops growing at 2048), and make the result
// independent of the number of threads: parallelize over blocks of columns, each task walking all
// the rows for its columns.
template <typename scalar_t>
void bias_tanh_backward_cpu(const scalar_t* grad_y, const scalar_t* y, scalar_t* grad_x,
                            scalar_t* grad_bias, int64_t rows, int64_t cols) {
  if (grad_x != nullptr) std::fill(grad_x, grad_x + rows * cols, scalar_t(0));    // replace
  if (grad_bias != nullptr) std::fill(grad_bias, grad_bias + cols, scalar_t(0));  // replace
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
    // TODO 3: save for the backward what it needs (and no more): ctx->save_for_backward({...}).
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
    // TODO 4: read back what the forward saved (ctx->get_saved_variables()), allocate grad_x and
    // grad_bias only if ctx->needs_input_grad(0) and (1) say so, run bias_tanh_backward_cpu with a
    // null pointer for each gradient not asked for, and return an undefined at::Tensor() for it.
    at::Tensor grad_x = at::zeros_like(grad_y);                             // replace
    at::Tensor grad_bias = at::zeros({grad_y.size(-1)}, grad_y.options());  // replace
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
