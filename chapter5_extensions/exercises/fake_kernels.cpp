// Exercise ch5/fake, given: the op ch5_fake::pad_to_multiple, its schema and its CPU kernel. You
// write its fake kernel in fake.py; nothing here is to change. Chapter 5's lesson, "Exercises".
//
//   pad_to_multiple(x, multiple): x of shape (..., n) padded with zeros at the end of its last
//   dimension to (..., ceil(n / multiple) * multiple). The reference: F.pad(x, (0, padded - n)).

// Per-operator headers instead of <ATen/ATen.h>: this file compiles in about half the time.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <vector>

namespace ch5_fake {

// Each of the `rows` rows of n values goes to the start of a row of `padded` values.
template <typename scalar_t>
void copy_rows(const scalar_t* in, scalar_t* out, int64_t rows, int64_t n, int64_t padded) {
  at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t i = 0; i < n; ++i) out[r * padded + i] = in[r * n + i];
    }
  });
}

at::Tensor pad_to_multiple_cpu(const at::Tensor& x_in, int64_t multiple) {
  const auto dtype = x_in.scalar_type();
  TORCH_CHECK(
      dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
      "pad_to_multiple: x must be float32, float64, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(x_in.dim() >= 1,
              "pad_to_multiple: x must have at least 1 dimension, got a 0-dim tensor");
  TORCH_CHECK(multiple >= 1, "pad_to_multiple: multiple must be >= 1, got ", multiple);
  const at::Tensor x = x_in.contiguous();
  const int64_t n = x.size(-1);
  const int64_t padded = (n + multiple - 1) / multiple * multiple;
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = padded;
  // A new contiguous tensor of zeros; the copy leaves the zeros at the end of each row.
  at::Tensor out = at::zeros(out_shape, x.options());
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "pad_to_multiple", [&] {
        copy_rows(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), rows, n, padded);
      });
  return out;
}

}  // namespace ch5_fake

// The schema says only what goes in and out: the output's shape, which depends on n and multiple,
// is for the fake kernel to compute.
TORCH_LIBRARY(ch5_fake, m) { m.def("pad_to_multiple(Tensor x, int multiple) -> Tensor"); }

TORCH_LIBRARY_IMPL(ch5_fake, CPU, m) { m.impl("pad_to_multiple", &ch5_fake::pad_to_multiple_cpu); }
