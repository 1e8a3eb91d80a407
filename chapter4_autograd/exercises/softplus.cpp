// Exercise ch4/softplus: softplus as a C++ torch::autograd::Function whose forward and backward
// are ATen ops. Statement and hints: chapter 4's lesson, "Exercises". Write the two TODOs.
// Check it: make check EX=ch4/softplus    (the checks: check_softplus.py)
//
//   y = log(1 + exp(beta x)) / beta, and y = x where beta x > threshold   dy/dx = sigmoid(beta x)
//   the reference: torch.nn.functional.softplus(x, beta, threshold)

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

// torch::autograd::Function, without the whole C++ frontend that <torch/extension.h> brings.
#include <torch/csrc/autograd/custom_function.h>
#include <ATen/TensorOperators.h>  // x * beta, grad_y * ...
#include <ATen/core/Tensor.h>
// One header per ATen function: another op needs its own (at::log: <ATen/ops/log.h>).
#include <ATen/ops/exp.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class Softplus : public torch::autograd::Function<Softplus> {
 public:
  // TODO 1: y from the formula above, with ATen ops (at::where, at::exp, at::log1p, ...) so that
  // it runs on x's device. Then keep in ctx what the backward needs: tensors with
  // ctx->save_for_backward({...}), numbers in ctx->saved_data["name"].
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double beta,
                            double threshold) {
    return x.clone();  // replace
  }

  // TODO 2: grad_x = grad_y * dy/dx, from what the forward saved (ctx->get_saved_variables(),
  // ctx->saved_data["name"].toDouble()). One gradient per input of forward, in order.
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const at::Tensor& grad_y = grad_outputs[0];
    if (!ctx->needs_input_grad(0)) return {at::Tensor(), at::Tensor(), at::Tensor()};
    at::Tensor grad_x = at::zeros_like(grad_y);   // replace
    return {grad_x, at::Tensor(), at::Tensor()};  // beta and threshold are numbers: no gradient
  }
};

at::Tensor softplus(const at::Tensor& x, double beta, double threshold) {
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "softplus: x must be a floating-point tensor (float32, float64, float16 or "
              "bfloat16), got ",
              x.scalar_type());
  TORCH_CHECK(beta != 0, "softplus: beta must not be 0 (y divides by it), got ", beta);
  return Softplus::apply(x, beta, threshold);
}

}  // namespace

// The op as torch.ops.ch4_softplus.softplus (chapter 5 explains TORCH_LIBRARY; here it is only a
// way in). A def() with a function is a CompositeImplicitAutograd kernel: it runs with autograd
// on, so Softplus::apply records its node as a Python autograd.Function's apply would.
TORCH_LIBRARY(ch4_softplus, m) {
  m.def("softplus(Tensor x, float beta=1, float threshold=20) -> Tensor", &softplus);
}
