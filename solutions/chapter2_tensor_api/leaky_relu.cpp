// Exercise ch2/leaky_relu, reference solution: leaky ReLU on the CPU, one raw loop over the data
// for every floating dtype. Statement: chapter 2's lesson, "Exercises".
// Check it: make check EX=ch2/leaky_relu SOLUTION=1
//
//   leaky_relu(x) = x if x > 0, else negative_slope * x
//   the reference: torch.nn.functional.leaky_relu(x, negative_slope)

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

#include <cstdint>

namespace {

// TODO 1 (solved): one element, in the type we compute in (float for the half types).
// `x > 0 ? x : ...`, with the product on the false side: a NaN fails the comparison and comes out
// as NaN * slope, which is NaN, as in torch. (`max(x, slope * x)` is right only for
// 0 <= slope <= 1.)
template <typename opmath_t>
inline opmath_t leaky_relu_one(opmath_t x, opmath_t negative_slope) {
  return x > opmath_t(0) ? x : x * negative_slope;
}

at::Tensor leaky_relu(const at::Tensor& x_in, double negative_slope) {
  TORCH_CHECK(at::isFloatingType(x_in.scalar_type()),
              "leaky_relu: x must be a floating-point tensor (float32, float64, float16 or "
              "bfloat16), got ",
              x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu(), "leaky_relu: x must be a CPU tensor, got ", x_in.device());

  // TODO 2 (solved): the loop reads x as one flat array, which only a contiguous tensor is:
  // contiguous() is free for one and a copy for a view such as x[:, ::3]. The output is a new
  // contiguous tensor of x's shape and dtype.
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "leaky_relu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
    const opmath_t slope = static_cast<opmath_t>(negative_slope);
    // Chunks of at least 32K elements: a smaller one costs more to hand to a thread than to do.
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        out_data[i] =
            static_cast<scalar_t>(leaky_relu_one(static_cast<opmath_t>(x_data[i]), slope));
      }
    });
  });
  return out;
}

}  // namespace

// The op as torch.ops.ch2_leaky_relu.leaky_relu (chapter 5 explains TORCH_LIBRARY; here it is
// only a way in).
TORCH_LIBRARY(ch2_leaky_relu, m) {
  m.def("leaky_relu(Tensor x, float negative_slope=0.01) -> Tensor", &leaky_relu);
}
