// Exercise ch3/leaky_relu, reference solution: leaky ReLU on the CPU and as a first CUDA kernel,
// one thread per element. Statement: chapter 3's lesson, "Exercises".
// Check it: make check EX=ch3/leaky_relu SOLUTION=1
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
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>

namespace {

constexpr int kThreads = 256;  // a multiple of the warp size (32); 8 blocks fill an SM

// TODO 1 (solved): one element, in the type we compute in (float for half types). `x > 0` is
// false for NaN, so NaN takes the second branch and stays NaN (NaN * slope is NaN), like torch.
template <typename opmath_t>
__host__ __device__ inline opmath_t leaky_relu_one(opmath_t x, opmath_t negative_slope) {
  return x > opmath_t(0) ? x : x * negative_slope;
}

// TODO 2 (solved): thread i of the grid computes out[i]. The cast comes before the product:
// blockIdx.x * blockDim.x in 32 bits wraps past 2^32, and an int index past 2^31.
template <typename scalar_t, typename opmath_t>
__global__ void leaky_relu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                                  int64_t numel, opmath_t negative_slope) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < numel) {  // the last block runs past the end when numel is not a multiple of kThreads
    out[i] = static_cast<scalar_t>(leaky_relu_one(static_cast<opmath_t>(x[i]), negative_slope));
  }
}

// ---- given: the launch (but for its grid size), the CPU loop, the checks, the registration -----

template <typename scalar_t>
void launch_leaky_relu(const at::Tensor& x, at::Tensor& out, double negative_slope) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t numel = x.numel();
  // TODO 3 (solved): enough blocks of kThreads threads for one thread per element, rounded up.
  const int64_t blocks = (numel + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks >= 1 && blocks <= std::numeric_limits<int32_t>::max(),
              "leaky_relu: a grid of ", blocks, " blocks for ", numel,
              " elements; a grid has 1 to 2^31 - 1 blocks");
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  leaky_relu_kernel<scalar_t, opmath_t><<<blocks, kThreads, 0, stream>>>(
      x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), numel,
      static_cast<opmath_t>(negative_slope));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor leaky_relu(const at::Tensor& x_in, double negative_slope) {
  TORCH_CHECK(x_in.scalar_type() == at::kFloat || x_in.scalar_type() == at::kDouble ||
                  x_in.scalar_type() == at::kHalf || x_in.scalar_type() == at::kBFloat16,
              "leaky_relu: x must be float32, float64, float16 or bfloat16, got ",
              x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() || x_in.is_cuda(),
              "leaky_relu: x must be on the CPU or a CUDA device, got ", x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty_like(x);
  if (x.numel() == 0) return out;  // no launch with zero blocks
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "leaky_relu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    if (x.is_cuda()) {
      const c10::cuda::CUDAGuard guard(x.device());
      launch_leaky_relu<scalar_t>(x, out, negative_slope);
      return;
    }
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
    const opmath_t slope = static_cast<opmath_t>(negative_slope);
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

// The op as torch.ops.ch3_leaky_relu.leaky_relu (chapter 5 explains TORCH_LIBRARY; here it is
// only a way in).
TORCH_LIBRARY(ch3_leaky_relu, m) {
  m.def("leaky_relu(Tensor x, float negative_slope=0.01) -> Tensor", &leaky_relu);
}
