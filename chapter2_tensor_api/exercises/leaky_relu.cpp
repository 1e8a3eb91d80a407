// Exercise ch2/leaky_relu: leaky ReLU on the CPU, one raw loop over the data for every floating
// dtype. Statement and hints: chapter 2's lesson, "Exercises". Write the two TODOs.
// Check it: make check EX=ch2/leaky_relu    (the checks, the specification: check_leaky_relu.py)
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

// TODO 1: one element, in the type we compute in (float for the half types). A NaN stays NaN, and
// negative_slope may be any number, 2 or -0.5 as well as 0.01.
template <typename opmath_t>
inline opmath_t leaky_relu_one(opmath_t x, opmath_t negative_slope) {
  return x;  // replace: x if x > 0, else negative_slope * x
}

at::Tensor leaky_relu(const at::Tensor& x_in, double negative_slope) {
  TORCH_CHECK(at::isFloatingType(x_in.scalar_type()),
              "leaky_relu: x must be a floating-point tensor (float32, float64, float16 or "
              "bfloat16), got ",
              x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu(), "leaky_relu: x must be a CPU tensor, got ", x_in.device());

  // TODO 2: out[i] = leaky_relu_one(x[i]) for every element, into a new tensor of x's shape and
  // dtype. The loop reads raw memory as one flat array: make it so first (a view such as
  // x[:, ::3] is not). Then AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, ...) for
  // scalar_t, and a loop over pointers that converts each element to at::opmath_type<scalar_t>,
  // computes, and converts back. at::parallel_for makes it use every core (the lesson's v3).
  return at::empty_like(x_in).zero_();  // replace
}

}  // namespace

// The op as torch.ops.ch2_leaky_relu.leaky_relu (chapter 5 explains TORCH_LIBRARY; here it is
// only a way in).
TORCH_LIBRARY(ch2_leaky_relu, m) {
  m.def("leaky_relu(Tensor x, float negative_slope=0.01) -> Tensor", &leaky_relu);
}
