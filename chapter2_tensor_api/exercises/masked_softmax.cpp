// Exercise ch2/masked_softmax: softmax over the last dimension of x, counting only the elements
// where mask is true. Statement and hints: chapter 2's lesson, "Exercises". Write the two TODOs.
// Check it: make check EX=ch2/masked_softmax    (the specification: check_masked_softmax.py)
//
//   out[r, j] = mask[r, j] ? exp(x[r, j] - m_r) / sum_k(mask[r, k] ? exp(x[r, k] - m_r) : 0) : 0
//   with m_r the largest x[r, k] where mask[r, k]; a row with no true in mask gives zeros
//   the reference: torch.softmax(x.masked_fill(~mask, -inf), -1).nan_to_num(0)

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace {

// TODO 1: one row of `cols` elements: out[j] = exp(x[j] - m) / (the sum of exp(x[k] - m) over
// the k where mask[k]) where mask[j], and 0 where not. m is the largest x[k] with mask[k]: without
// it, exp(1000) is inf even in double. Compute in at::opmath_type<scalar_t>. The values under a
// false mask may be anything, inf or NaN included; a row with no true in mask is all zeros.
template <typename scalar_t>
void masked_softmax_row(const scalar_t* x, const bool* mask, scalar_t* out, int64_t cols) {}

at::Tensor masked_softmax(const at::Tensor& x_in, const at::Tensor& mask_in) {
  TORCH_CHECK(at::isFloatingType(x_in.scalar_type()),
              "masked_softmax: x must be a floating-point tensor (float32, float64, float16 or "
              "bfloat16), got ",
              x_in.scalar_type());
  TORCH_CHECK(mask_in.scalar_type() == at::kBool,
              "masked_softmax: mask must be a bool tensor, got ", mask_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() && mask_in.is_cpu(),
              "masked_softmax: x and mask must be CPU tensors, got ", x_in.device(), " and ",
              mask_in.device());
  TORCH_CHECK(x_in.dim() >= 1,
              "masked_softmax: x must have at least 1 dimension (softmax is over the last), got a "
              "0-dim tensor");
  TORCH_CHECK(mask_in.sizes() == x_in.sizes(), "masked_softmax: mask must have x's shape ",
              x_in.sizes(), ", got ", mask_in.sizes());

  // Both are read as rows of `cols` elements, one after the other: only a contiguous tensor is
  // laid out that way (an expanded padding mask, for one, is not).
  const at::Tensor x = x_in.contiguous();
  const at::Tensor mask = mask_in.contiguous();
  at::Tensor out = at::empty_like(x);
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;

  // TODO 2: masked_softmax_row for every row, on every core: AT_DISPATCH_FLOATING_TYPES_AND2
  // (at::kHalf, at::kBFloat16, ...) for scalar_t, then at::parallel_for over the rows with a grain
  // of about 32K elements' worth of rows (the lesson's v3). Row r starts at element r * cols.
  out.zero_();  // replace
  return out;
}

}  // namespace

// The op as torch.ops.ch2_masked_softmax.masked_softmax (chapter 5 explains TORCH_LIBRARY; here it
// is only a way in).
TORCH_LIBRARY(ch2_masked_softmax, m) {
  m.def("masked_softmax(Tensor x, Tensor mask) -> Tensor", &masked_softmax);
}
