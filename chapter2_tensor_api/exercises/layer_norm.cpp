// Exercise ch2/layer_norm: layer normalisation over the last dimension, the forward pass that
// returns, besides y, the per-row mean and 1/std a backward pass reuses. Statement and hints:
// chapter 2's lesson, "Exercises". Write the two TODOs. Check it: make check EX=ch2/layer_norm
//
//   mean_r = sum_j x[r, j] / n      var_r = sum_j (x[r, j] - mean_r)^2 / n      (n = x.size(-1))
//   rstd_r = 1 / sqrt(var_r + eps)  y[r, j] = (x[r, j] - mean_r) * rstd_r * weight[j] + bias[j]
//   the reference: torch.nn.functional.layer_norm and torch.native_layer_norm

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace {

// TODO 1: one row of n elements: its mean and rstd (the formulas above; the variance divides by n,
// not n - 1), written to *mean_out and *rstd_out, and y[j] for every j. Accumulate in opmath_t
// (float for the half types, double for double). Mind how you compute the variance: the rows of
// x = 1e4 + N(0, 1) must come out right in float32.
template <typename scalar_t>
void layer_norm_row(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, int64_t n,
                    at::opmath_type<scalar_t> eps, scalar_t* y, scalar_t* mean_out,
                    scalar_t* rstd_out) {}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& x_in,
                                                          const at::Tensor& weight_in,
                                                          const at::Tensor& bias_in, double eps) {
  TORCH_CHECK(at::isFloatingType(x_in.scalar_type()),
              "layer_norm: x must be a floating-point tensor (float32, float64, float16 or "
              "bfloat16), got ",
              x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() && weight_in.is_cpu() && bias_in.is_cpu(),
              "layer_norm: x, weight and bias must be CPU tensors, got ", x_in.device(), ", ",
              weight_in.device(), " and ", bias_in.device());
  TORCH_CHECK(x_in.dim() >= 1 && x_in.size(-1) >= 1,
              "layer_norm: x must have a last dimension of at least 1 element to normalise over, "
              "got shape ",
              x_in.sizes());
  const int64_t n = x_in.size(-1);
  TORCH_CHECK(weight_in.dim() == 1 && weight_in.size(0) == n,
              "layer_norm: weight must have shape [", n, "] (x.size(-1)), got ", weight_in.sizes());
  TORCH_CHECK(bias_in.dim() == 1 && bias_in.size(0) == n, "layer_norm: bias must have shape [", n,
              "] (x.size(-1)), got ", bias_in.sizes());
  TORCH_CHECK(
      weight_in.scalar_type() == x_in.scalar_type() && bias_in.scalar_type() == x_in.scalar_type(),
      "layer_norm: weight and bias must have x's dtype ", x_in.scalar_type(), ", got ",
      weight_in.scalar_type(), " and ", bias_in.scalar_type());

  // TODO 2: the op. The row function reads flat arrays: make x, weight and bias so. Allocate y
  // like x, and mean and rstd of shape x.shape[:-1] + (1,) in x's dtype, as torch.native_layer_norm
  // returns them. Then AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, ...) and one
  // at::parallel_for over the rows (grain: ~32K elements' worth of rows), calling layer_norm_row
  // for each. Row r of x and y starts at element r * n; its mean and rstd are element r.
  const at::Tensor zeros = at::empty_like(x_in).zero_();  // replace, with the line below
  return {zeros, zeros, zeros};
}

}  // namespace

// The op as torch.ops.ch2_layer_norm.layer_norm (chapter 5 explains TORCH_LIBRARY; here it is only
// a way in).
TORCH_LIBRARY(ch2_layer_norm, m) {
  m.def("layer_norm(Tensor x, Tensor weight, Tensor bias, float eps) -> (Tensor, Tensor, Tensor)",
        &layer_norm);
}
