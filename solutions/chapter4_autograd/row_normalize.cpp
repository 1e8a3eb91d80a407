// Exercise ch4/row_normalize, reference solution: each row of x scaled to unit length, as a C++
// torch::autograd::Function whose backward you derive. Statement: chapter 4's lesson, "Exercises".
// Check it: make check EX=ch4/row_normalize SOLUTION=1
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
  // TODO 1 (solved): the backward needs y, and the norm to tell the two cases apart: one number a
  // row, a small price. y is the output, which the next layer keeps anyway.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double eps) {
    const at::Tensor norm = at::linalg_vector_norm(x, 2, {-1}, /*keepdim=*/true);
    at::Tensor y = x / norm.clamp_min(eps);
    ctx->save_for_backward({y, norm});
    ctx->saved_data["eps"] = eps;
    return y;
  }

  // TODO 2 (solved): where ||x|| >= eps, y = x / ||x|| and the norm moves with x:
  //   grad_x = (g - y sum(g y)) / ||x||,
  // the part of g along y taken out (stretching x along itself does not change y). Where
  // ||x|| < eps, y = x / eps, a constant scale: grad_x = g / eps. At ||x|| = eps exactly the first
  // case, as torch's clamp_min does.
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    // A tensor computed in forward (where autograd records nothing) and saved is a constant to
    // autograd: a graph of this backward would miss how it depends on x. Refuse to record one.
    TORCH_CHECK(!(at::GradMode::is_enabled() && grad_outputs[0].requires_grad()),
                "row_normalize: double backward is not implemented (tensors saved in forward "
                "are constants to autograd)");
    const at::Tensor& grad_y = grad_outputs[0];
    if (!ctx->needs_input_grad(0)) return {at::Tensor(), at::Tensor()};
    const tensor_list saved = ctx->get_saved_variables();
    const at::Tensor& y = saved[0];
    const at::Tensor& norm = saved[1];
    const double eps = ctx->saved_data["eps"].toDouble();
    const at::Tensor along_y = (grad_y * y).sum(-1, /*keepdim=*/true);
    at::Tensor grad_x = at::where(norm < eps, grad_y, grad_y - y * along_y) / norm.clamp_min(eps);
    return {grad_x, at::Tensor()};  // eps is a number: no gradient
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
