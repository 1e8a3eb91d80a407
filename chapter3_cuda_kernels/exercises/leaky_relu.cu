// Exercise ch3/leaky_relu: leaky ReLU on the CPU and as a first CUDA kernel, one thread per
// element. Statement and hints: chapter 3's lesson, "Exercises". Write the three TODOs.
// Check it: make check EX=ch3/leaky_relu    (its checks and speed target: check_leaky_relu.py)
//
//   leaky_relu(x) = x if x > 0, else negative_slope * x
//   the reference: torch.nn.functional.leaky_relu(x, negative_slope)
//
// The op around these functions (checks, dtypes, device, stream) is given in leaky_relu_op.cpp.

#include <cuda_runtime.h>

#include <cstdint>

#include "leaky_relu.h"

namespace ch3_leaky_relu {
namespace {

constexpr int kThreads = 256;  // a multiple of the warp size (32); 8 blocks fill an SM

// TODO 1: one element, in the type we compute in (float for half types). The CPU loop and the
// kernel below both call it, so the CPU checks test it on any machine. A NaN stays NaN.
template <typename opmath_t>
__host__ __device__ inline opmath_t leaky_relu_one(opmath_t x, opmath_t negative_slope) {
  return x;  // replace: x if x > 0, else negative_slope * x
}

// TODO 2: thread i of the grid (i from blockIdx.x, blockDim.x and threadIdx.x) computes
// out[i] = leaky_relu_one(x[i], negative_slope) in opmath_t, if i < numel: the grid is whole
// blocks, so the last one may run past the end. i is an int64_t: numel can exceed 2^31.
template <typename scalar_t, typename opmath_t>
__global__ void leaky_relu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                                  int64_t numel, opmath_t negative_slope) {}

}  // namespace

// TODO 3: the number of blocks of kThreads threads that gives every element its thread.
int64_t leaky_relu_blocks(int64_t numel) {
  return 1;  // replace: one block covers only the first kThreads elements
}

// ---- given: the launch and the CPU loop (leaky_relu.h declares them; leaky_relu_op.cpp calls
// them) -------------------------------------------------------------------------------------------

template <typename scalar_t>
cudaError_t leaky_relu_cuda(const scalar_t* x, scalar_t* out, int64_t numel, double negative_slope,
                            cudaStream_t stream) {
  using opmath_t = at::opmath_type<scalar_t>;
  leaky_relu_kernel<scalar_t, opmath_t><<<leaky_relu_blocks(numel), kThreads, 0, stream>>>(
      x, out, numel, static_cast<opmath_t>(negative_slope));
  return cudaGetLastError();  // a launch reports its errors here, not by a return value
}

template <typename scalar_t>
void leaky_relu_cpu(const scalar_t* x, scalar_t* out, int64_t numel, double negative_slope) {
  using opmath_t = at::opmath_type<scalar_t>;
  const opmath_t slope = static_cast<opmath_t>(negative_slope);
  for (int64_t i = 0; i < numel; ++i) {
    out[i] = static_cast<scalar_t>(leaky_relu_one(static_cast<opmath_t>(x[i]), slope));
  }
}

// The four dtypes the op dispatches to, compiled here for leaky_relu_op.cpp to link against.
#define INSTANTIATE(scalar_t)                                                                 \
  template cudaError_t leaky_relu_cuda<scalar_t>(const scalar_t*, scalar_t*, int64_t, double, \
                                                 cudaStream_t);                               \
  template void leaky_relu_cpu<scalar_t>(const scalar_t*, scalar_t*, int64_t, double);
INSTANTIATE(float)
INSTANTIATE(double)
INSTANTIATE(c10::Half)
INSTANTIATE(c10::BFloat16)
#undef INSTANTIATE

}  // namespace ch3_leaky_relu
