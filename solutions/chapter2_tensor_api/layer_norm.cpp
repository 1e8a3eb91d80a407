// Exercise ch2/layer_norm, reference solution: layer normalisation over the last dimension, the
// forward pass that returns, besides y, the per-row mean and 1/std a backward pass reuses.
// Statement: chapter 2's lesson, "Exercises". Check it: make check EX=ch2/layer_norm SOLUTION=1
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

// TODO 1 (solved): one row of n elements, in opmath_t (float for the half types, double for
// double). Two passes: the mean first, then the mean of squared deviations from it. The shortcut
// E[x^2] - E[x]^2 in one pass subtracts two large, nearly equal numbers: for x = 1e4 + N(0, 1)
// both are ~1e8, where a float's spacing is 8, and the variance of ~1 is lost (or negative).
template <typename scalar_t>
void layer_norm_row(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, int64_t n,
                    at::opmath_type<scalar_t> eps, scalar_t* y, scalar_t* mean_out,
                    scalar_t* rstd_out) {
  using opmath_t = at::opmath_type<scalar_t>;
  opmath_t sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<opmath_t>(x[j]);
  const opmath_t mean = sum / static_cast<opmath_t>(n);
  opmath_t sum_sq = 0;
  for (int64_t j = 0; j < n; ++j) {
    const opmath_t d = static_cast<opmath_t>(x[j]) - mean;
    sum_sq += d * d;
  }
  const opmath_t rstd = opmath_t(1) / std::sqrt(sum_sq / static_cast<opmath_t>(n) + eps);
  for (int64_t j = 0; j < n; ++j) {
    const opmath_t normalised = (static_cast<opmath_t>(x[j]) - mean) * rstd;
    y[j] = static_cast<scalar_t>(normalised * static_cast<opmath_t>(weight[j]) +
                                 static_cast<opmath_t>(bias[j]));
  }
  *mean_out = static_cast<scalar_t>(mean);
  *rstd_out = static_cast<scalar_t>(rstd);
}

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

  // TODO 2 (solved): all three inputs are read as flat arrays, so contiguous; y like x, and mean
  // and rstd of shape x.shape[:-1] + (1,) in x's dtype, as torch.native_layer_norm returns them
  // (the trailing 1 lets (x - mean) * rstd broadcast). One parallel_for over the rows, with a
  // grain of ~32K elements' worth of rows.
  const at::Tensor x = x_in.contiguous();
  const at::Tensor weight = weight_in.contiguous();
  const at::Tensor bias = bias_in.contiguous();
  at::Tensor y = at::empty_like(x);
  std::vector<int64_t> stat_sizes = x.sizes().vec();
  stat_sizes.back() = 1;
  at::Tensor mean = at::empty(stat_sizes, x.options());
  at::Tensor rstd = at::empty(stat_sizes, x.options());
  const int64_t rows = x.numel() / n;
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / n);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "layer_norm", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    const scalar_t* weight_data = weight.const_data_ptr<scalar_t>();
    const scalar_t* bias_data = bias.const_data_ptr<scalar_t>();
    scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
    scalar_t* mean_data = mean.mutable_data_ptr<scalar_t>();
    scalar_t* rstd_data = rstd.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, grain_rows, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        layer_norm_row<scalar_t>(x_data + row * n, weight_data, bias_data, n,
                                 static_cast<opmath_t>(eps), y_data + row * n, mean_data + row,
                                 rstd_data + row);
      }
    });
  });
  return {y, mean, rstd};
}

}  // namespace

// The op as torch.ops.ch2_layer_norm.layer_norm (chapter 5 explains TORCH_LIBRARY; here it is only
// a way in).
TORCH_LIBRARY(ch2_layer_norm, m) {
  m.def("layer_norm(Tensor x, Tensor weight, Tensor bias, float eps) -> (Tensor, Tensor, Tensor)",
        &layer_norm);
}
