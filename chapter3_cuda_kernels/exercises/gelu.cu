// Exercise ch3/gelu: GELU (tanh approximation) on the CPU and as a CUDA kernel that moves 16 bytes
// per load and store. Statement and hints: chapter 3's lesson, "Exercises". Write the two TODOs.
// Check it: make check EX=ch3/gelu    (the checks, and the speed to reach: check_gelu.py)
//
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
//   the reference: torch.nn.functional.gelu(x, approximate="tanh")
//
// The op around these functions (checks, dtypes, device, stream) is given in gelu_op.cpp.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "gelu.h"

namespace ch3_gelu {
namespace {

// TODO 1: the formula, for one element, in the type we compute in (float for half types). The
// CPU loop and the kernel below both call it, so the CPU checks test it on any machine.
template <typename opmath_t>
__host__ __device__ inline opmath_t gelu_tanh(opmath_t x) {
  return x;  // replace: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
}

template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) AlignedVector {
  scalar_t val[kVec];
};

// TODO 2: out[i] = gelu_tanh(x[i]) for all numel elements, with a grid-stride loop over vectors
// of kVec elements: load one AlignedVector with one instruction, compute each element in opmath_t,
// store one vector. Then the last numel % kVec elements (fewer than kVec), one per thread. Indices
// are int64_t: numel can exceed 2^31.
template <typename scalar_t, int kVec>
__global__ void gelu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                            int64_t numel) {}

}  // namespace

// ---- given: the launch and the CPU loop (gelu.h declares them; gelu_op.cpp calls them) ----------

template <typename scalar_t>
cudaError_t gelu_cuda(const scalar_t* x, scalar_t* out, int64_t numel, cudaStream_t stream) {
  // The widest vector (at most 16 bytes) at which both pointers are aligned: a view such as
  // x[1:] starts one element into its buffer and must go one element at a time.
  int vec = 16 / static_cast<int>(sizeof(scalar_t));
  while (vec > 1 && (reinterpret_cast<std::uintptr_t>(x) % (vec * sizeof(scalar_t)) != 0 ||
                     reinterpret_cast<std::uintptr_t>(out) % (vec * sizeof(scalar_t)) != 0)) {
    vec /= 2;
  }
  constexpr int kThreads = 256;
  // One launch of gelu_kernel<scalar_t, kVec>: enough blocks for every vector (and the tail), but
  // no more than this GPU holds at once (the occupancy API: blocks per SM for this kernel, times
  // the SMs); the grid-stride loop covers the rest.
  auto launch = [&](auto kernel, int kVec) {
    int device = 0, sm_count = 0, blocks_per_sm = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error == cudaSuccess) {
      error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
    }
    if (error == cudaSuccess) {
      error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, kThreads, 0);
    }
    if (error != cudaSuccess) return error;
    const int64_t blocks = std::min<int64_t>((numel / kVec + kThreads) / kThreads,
                                             static_cast<int64_t>(sm_count) * blocks_per_sm);
    kernel<<<blocks, kThreads, 0, stream>>>(x, out, numel);
    return cudaGetLastError();  // a launch reports its errors here, not by a return value
  };
  switch (vec) {
    case 8:
      return launch(gelu_kernel<scalar_t, 8>, 8);
    case 4:
      return launch(gelu_kernel<scalar_t, 4>, 4);
    case 2:
      return launch(gelu_kernel<scalar_t, 2>, 2);
    default:
      return launch(gelu_kernel<scalar_t, 1>, 1);
  }
}

template <typename scalar_t>
void gelu_cpu(const scalar_t* x, scalar_t* out, int64_t numel) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (int64_t i = 0; i < numel; ++i) {
    out[i] = static_cast<scalar_t>(gelu_tanh(static_cast<opmath_t>(x[i])));
  }
}

// The four dtypes the op dispatches to, compiled here for gelu_op.cpp to link against.
#define INSTANTIATE(scalar_t)                                                                  \
  template cudaError_t gelu_cuda<scalar_t>(const scalar_t*, scalar_t*, int64_t, cudaStream_t); \
  template void gelu_cpu<scalar_t>(const scalar_t*, scalar_t*, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)
INSTANTIATE(c10::Half)
INSTANTIATE(c10::BFloat16)
#undef INSTANTIATE

}  // namespace ch3_gelu
