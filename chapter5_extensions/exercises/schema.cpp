// Exercise ch5/schema: declare an operator with TORCH_LIBRARY and register its CPU kernel and a
// meta kernel per dispatch key. Statement and hints: chapter 5's lesson, "Exercises". Write the
// three TODOs. Check it: make check EX=ch5/schema    (the checks: check_schema.py)
//
//   scaled_add(x, y, alpha) = x + alpha * y      the reference: torch.add(x, y, alpha=alpha)

// Per-operator headers instead of <ATen/ATen.h>: this file compiles in about half the time.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace ch5_schema {

// ---- given: the input checks and the CPU kernel ------------------------------------------------

// Every check reads metadata only (dtype, shape), so a meta kernel can run them on tensors that
// have no data.
void check_scaled_add_inputs(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "scaled_add: x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(y.scalar_type() == x.scalar_type(),
              "scaled_add: x and y must have the same dtype, got ", x.scalar_type(), " and ",
              y.scalar_type());
  TORCH_CHECK(x.sizes() == y.sizes(), "scaled_add: x and y must have the same shape, got ",
              x.sizes(), " and ", y.sizes());
}

at::Tensor scaled_add_cpu(const at::Tensor& x_in, const at::Tensor& y_in, double alpha) {
  check_scaled_add_inputs(x_in, y_in);
  const at::Tensor x = x_in.contiguous();
  const at::Tensor y = y_in.contiguous();
  // x is contiguous here, so out is too, whatever the strides of x_in: the meta kernel, which
  // sees x_in, must promise the same.
  at::Tensor out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scaled_add", [&] {
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    const scalar_t* y_data = y.const_data_ptr<scalar_t>();
    scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
    const scalar_t a = static_cast<scalar_t>(alpha);
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out_data[i] = x_data[i] + a * y_data[i];
    });
  });
  return out;
}

// TODO 1: the meta kernel: refuse what the CPU kernel refuses, and return a new tensor with the
// shape, dtype and strides of the CPU kernel's output, on x's device ("meta" when it runs). It
// must not touch data: a meta tensor has none.
at::Tensor scaled_add_meta(const at::Tensor& x, const at::Tensor& y, double alpha) {
  return x;  // replace
}

}  // namespace ch5_schema

// TODO 2: declare the op: scaled_add takes tensors x and y and a float alpha, returns a tensor.
// Write its schema in PyTorch's syntax, the arguments named, and no kernel here.
TORCH_LIBRARY(ch5_schema, m) {}

// TODO 3: register scaled_add_cpu for the CPU dispatch key and scaled_add_meta for Meta.
TORCH_LIBRARY_IMPL(ch5_schema, CPU, m) {}

TORCH_LIBRARY_IMPL(ch5_schema, Meta, m) {}
