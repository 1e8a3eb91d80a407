// Exercise ch5/schema, reference solution: declare an operator with TORCH_LIBRARY and register its
// CPU kernel and a meta kernel per dispatch key. Statement: chapter 5's lesson, "Exercises".
// Check it: make check EX=ch5/schema SOLUTION=1
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

// TODO 1 (solved): the meta kernel runs the same checks and returns an output with the CPU
// kernel's shape, dtype and strides (contiguous, even for a transposed x: not empty_like(x)), on
// x's device, which is "meta" here. It never touches data: meta tensors have none.
at::Tensor scaled_add_meta(const at::Tensor& x, const at::Tensor& y, double alpha) {
  check_scaled_add_inputs(x, y);
  return at::empty(x.sizes(), x.options());
}

}  // namespace ch5_schema

// TODO 2 (solved): the schema, with the arguments' names. Declared without a kernel: the kernels
// come per dispatch key below. (m.def(name, &fn) would infer a schema with unnamed arguments and
// register fn for every backend, meta tensors included.)
TORCH_LIBRARY(ch5_schema, m) { m.def("scaled_add(Tensor x, Tensor y, float alpha) -> Tensor"); }

// TODO 3 (solved): one kernel per dispatch key; the dispatcher picks by the inputs' device.
TORCH_LIBRARY_IMPL(ch5_schema, CPU, m) { m.impl("scaled_add", &ch5_schema::scaled_add_cpu); }

TORCH_LIBRARY_IMPL(ch5_schema, Meta, m) { m.impl("scaled_add", &ch5_schema::scaled_add_meta); }
