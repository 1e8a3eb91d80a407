// Exercise ch4/row_normalize: each row of x scaled to unit length, as a C++
// torch::autograd::Function whose backward you derive. Statement and hints: chapter 4's lesson,
// "Exercises". Write the two TODOs. Check it: make check EX=ch4/row_normalize
//
//   y = x / max(||x||, eps), the 2-norm taken over the last dimension
//   the reference: torch.nn.functional.normalize(x, p=2, dim=-1, eps=eps)

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

// torch::autograd::Function, without the whole C++ frontend that <torch/extension.h> brings.
#include <torch/csrc/autograd/custom_function.h>
#include <ATen/TensorOperators.h>  // x / norm, grad_y * y, ...
#include <ATen/core/Tensor.h>
// One header per ATen function: another op needs its own (at::log: <ATen/ops/log.h>).
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class RowNormalize : public torch::autograd::Function<RowNormalize> {
 public:
  // TODO 1: y from the formula above with ATen ops (at::linalg_vector_norm, clamp_min), so that
  // it runs on x's device; then save what your backward will need.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double eps) {
    at::Tensor y = x.clone();  // replace
    return y;
  }

  // TODO 2: grad_x from grad_y and what forward saved. Derive it first (the lesson's hints):
  // there are two cases, ||x|| >= eps and ||x|| < eps. One gradient per input of forward.
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    // A tensor computed in forward (where autograd records nothing) and saved is a constant to
    // autograd: a graph of this backward would miss how it depends on x. Refuse to record one.
    TORCH_CHECK(!(at::GradMode::is_enabled() && grad_outputs[0].requires_grad()),
                "row_normalize: double backward is not implemented (tensors saved in forward "
                "are constants to autograd)");
    const at::Tensor& grad_y = grad_outputs[0];
    if (!ctx->needs_input_grad(0)) return {at::Tensor(), at::Tensor()};
    at::Tensor grad_x = at::zeros_like(grad_y);  // replace
    return {grad_x, at::Tensor()};               // eps is a number: no gradient
  }
};

at::Tensor row_normalize(const at::Tensor& x, double eps) {
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "row_normalize: x must be a floating-point tensor (float32, float64, float16 or "
              "bfloat16), got ",
              x.scalar_type());
  TORCH_CHECK(x.dim() >= 1,
              "row_normalize: x must have at least 1 dimension (rows along the last), got a "
              "0-dim tensor");
  TORCH_CHECK(eps > 0, "row_normalize: eps must be positive (a zero row divides by it), got ", eps);
  return RowNormalize::apply(x, eps);
}

}  // namespace

// The op as torch.ops.ch4_row_normalize.row_normalize (chapter 5 explains TORCH_LIBRARY; here it
// is only a way in). A def() with a function is a CompositeImplicitAutograd kernel: it runs with
// autograd on, so RowNormalize::apply records its node.
TORCH_LIBRARY(ch4_row_normalize, m) {
  m.def("row_normalize(Tensor x, float eps=1e-12) -> Tensor", &row_normalize);
}
