// Exercise ch2/masked_softmax, reference solution: softmax over the last dimension of x, counting
// only the elements where mask is true. Statement: chapter 2's lesson, "Exercises".
// Check it: make check EX=ch2/masked_softmax SOLUTION=1
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

// TODO 1 (solved): one row of `cols` elements. Three passes over the row: the largest unmasked
// value, the sum of exponentials shifted by it, the normalised outputs. The shift makes every
// exponent <= 0, so exp cannot overflow (exp(1000) is inf even in double), and it cancels in the
// quotient. The values under a false mask are never read into the arithmetic: they may be
// anything, inf or NaN included.
template <typename scalar_t>
void masked_softmax_row(const scalar_t* x, const bool* mask, scalar_t* out, int64_t cols) {
  using opmath_t = at::opmath_type<scalar_t>;
  opmath_t row_max = -std::numeric_limits<opmath_t>::infinity();
  bool any_kept = false;
  for (int64_t j = 0; j < cols; ++j) {
    if (mask[j]) {
      row_max = std::max(row_max, static_cast<opmath_t>(x[j]));
      any_kept = true;
    }
  }
  if (!any_kept) {  // no element to normalise over: all zeros, not exp(-inf - -inf) = NaN
    std::fill(out, out + cols, scalar_t(0));
    return;
  }
  opmath_t sum = 0;
  for (int64_t j = 0; j < cols; ++j) {
    if (mask[j]) sum += std::exp(static_cast<opmath_t>(x[j]) - row_max);
  }
  const opmath_t inv_sum = opmath_t(1) / sum;
  for (int64_t j = 0; j < cols; ++j) {
    out[j] = mask[j]
                 ? static_cast<scalar_t>(std::exp(static_cast<opmath_t>(x[j]) - row_max) * inv_sum)
                 : scalar_t(0);
  }
}

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

  // TODO 2 (solved): every row, on every core. Rows are independent, so threads never write the
  // same element. A chunk gets at least ~32K elements: a smaller one costs more to hand to a
  // thread than to compute.
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, cols));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "masked_softmax", [&] {
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    const bool* mask_data = mask.const_data_ptr<bool>();
    scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, grain_rows, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        masked_softmax_row<scalar_t>(x_data + row * cols, mask_data + row * cols,
                                     out_data + row * cols, cols);
      }
    });
  });
  return out;
}

}  // namespace

// The op as torch.ops.ch2_masked_softmax.masked_softmax (chapter 5 explains TORCH_LIBRARY; here it
// is only a way in).
TORCH_LIBRARY(ch2_masked_softmax, m) {
  m.def("masked_softmax(Tensor x, Tensor mask) -> Tensor", &masked_softmax);
}
