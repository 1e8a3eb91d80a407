// autograd_cpp.cpp: fused_bias_relu as a C++ torch::autograd::Function, the same op as the Python
// FusedBiasReLUFunction in functions.py, for code that must be differentiable without Python
// (lesson: "The same op with a C++ autograd::Function").

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/core/Tensor.h>
// torch::autograd::Function, without the whole C++ frontend that <torch/extension.h> brings.
#include <torch/csrc/autograd/custom_function.h>

#include "ops.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class FusedBiasReLU : public torch::autograd::Function<FusedBiasReLU> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias,
                            double scale) {
    at::Tensor y = fused_bias_relu_forward(x, bias, scale);
    ctx->save_for_backward({y});  // the output, not the input: all the backward needs
    ctx->saved_data["scale"] = scale;
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    // Our kernels do not record autograd graphs: when a graph of this backward is being recorded
    // (create_graph=True) and grad_y depends on the inputs, its gradient would silently be
    // wrong. Say so instead (in Python, @once_differentiable does the same, lazily).
    TORCH_CHECK(!(at::GradMode::is_enabled() && grad_outputs[0].requires_grad()),
                "fused_bias_relu_cpp_autograd: double backward is not implemented (its backward "
                "kernels are not differentiable)");
    const at::Tensor y = ctx->get_saved_variables()[0];
    const double scale = ctx->saved_data["scale"].toDouble();
    auto [grad_x, grad_bias] = fused_bias_relu_backward(
        grad_outputs[0], y, scale, ctx->needs_input_grad(0), ctx->needs_input_grad(1));
    return {grad_x, grad_bias, at::Tensor()};  // scale is a number: no gradient
  }
};

}  // namespace

at::Tensor fused_bias_relu_cpp_autograd(const at::Tensor& x, const at::Tensor& bias, double scale) {
  return FusedBiasReLU::apply(x, bias, scale);
}
