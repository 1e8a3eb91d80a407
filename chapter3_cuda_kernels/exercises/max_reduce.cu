// Exercise ch3/max_reduce: the maximum of all elements, on the CPU and as a two-pass CUDA
// reduction: warp shuffles, then shared memory across warps, one partial per block; then one block
// reduces the partials. Statement and hints: chapter 3's lesson, "Exercises". Write the two TODOs.
// Check it: make check EX=ch3/max_reduce    (its checks and speed target: check_max_reduce.py)
//
//   the reference: torch.amax(x), a 0-dim tensor of x's dtype; NaN if any element is NaN
//
// The op around these functions (checks, dtypes, memory, device, stream) is given in
// max_reduce_op.cpp.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "max_reduce.h"

namespace ch3_max_reduce {
namespace {

constexpr int kThreads = 256;  // a multiple of the warp size: every warp is full
constexpr int kWarp = 32;
constexpr int kUnroll = 4;  // loads each thread issues before it uses the first

// TODO 1: the larger of a and b, and NaN if either is NaN (torch.max's rule). The CPU loop and
// the kernel below both call it, so the CPU checks test it on any machine. The line below is the
// textbook maximum: work out what it returns when a, or b, is NaN.
template <typename opmath_t>
__host__ __device__ inline opmath_t max_propagate_nan(opmath_t a, opmath_t b) {
  return a > b ? a : b;  // replace: NaN if a or b is NaN, else the larger
}

// TODO 2: out[blockIdx.x] = max_propagate_nan over the elements this block's threads visit.
// Launched twice (see max_reduce_cuda): over x, writing one partial per block in opmath_t; then
// as one block over the partials, writing the result in x's type. Indices are int64_t.
//   1. Each thread: a maximum m in opmath_t, from the identity of max, over x[i] for i = its
//      global index, then + the grid's size, while i < numel (a grid-stride loop). Issue kUnroll
//      loads before the first comparison: one load at a time leaves the memory waiting.
//   2. Each warp: combine m with __shfl_down_sync(0xffffffffu, m, offset) for offsets 16 down to
//      1; lane 0 then holds the warp's maximum and writes it to a __shared__ array, one per warp.
//   3. After __syncthreads(), warp 0 reduces those kThreads / kWarp values the same way (its
//      lanes from kThreads / kWarp up have no value: they take -inf), and its lane 0 writes
//      out[blockIdx.x].
template <typename in_t, typename out_t>
__global__ void max_reduce_kernel(const in_t* __restrict__ x, int64_t numel,
                                  out_t* __restrict__ out) {
  using opmath_t = at::opmath_type<in_t>;
}

}  // namespace

// ---- given: the launches and the CPU loop (max_reduce.h declares them; max_reduce_op.cpp calls
// them) -------------------------------------------------------------------------------------------

template <typename scalar_t>
cudaError_t max_reduce_blocks(int64_t numel, int64_t* blocks) {
  // One full wave of blocks: as many as every SM holds at once (the occupancy API asks the
  // runtime), fewer for a small tensor. The grid-stride loop covers the rest, and few blocks
  // mean few partials for the second pass.
  int device = 0, sm_count = 0, blocks_per_sm = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) {
    error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  }
  if (error == cudaSuccess) {
    error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks_per_sm, max_reduce_kernel<scalar_t, at::opmath_type<scalar_t>>, kThreads, 0);
  }
  *blocks = std::clamp<int64_t>((numel + kThreads - 1) / kThreads, 1,
                                std::max<int64_t>(1, int64_t{sm_count} * blocks_per_sm));
  return error;
}

template <typename scalar_t>
cudaError_t max_reduce_cuda(const scalar_t* x, int64_t numel, at::opmath_type<scalar_t>* partials,
                            int64_t blocks, scalar_t* out, cudaStream_t stream) {
  using opmath_t = at::opmath_type<scalar_t>;
  max_reduce_kernel<scalar_t, opmath_t><<<blocks, kThreads, 0, stream>>>(x, numel, partials);
  cudaError_t error = cudaGetLastError();  // a launch reports its errors here
  if (error != cudaSuccess) return error;
  // One block over the partials, on the same stream, so it runs after the first pass. No atomics:
  // CUDA has no atomicMax for floating point, and this writes the result once.
  max_reduce_kernel<opmath_t, scalar_t><<<1, kThreads, 0, stream>>>(partials, blocks, out);
  return cudaGetLastError();
}

template <typename scalar_t>
at::opmath_type<scalar_t> max_reduce_cpu(const scalar_t* x, int64_t numel,
                                         at::opmath_type<scalar_t> init) {
  using opmath_t = at::opmath_type<scalar_t>;
  opmath_t m = init;
  for (int64_t i = 0; i < numel; ++i) m = max_propagate_nan(m, static_cast<opmath_t>(x[i]));
  return m;
}

// The four dtypes the op dispatches to, compiled here for max_reduce_op.cpp to link against.
#define INSTANTIATE(scalar_t)                                                             \
  template at::opmath_type<scalar_t> max_reduce_cpu<scalar_t>(const scalar_t*, int64_t,   \
                                                              at::opmath_type<scalar_t>); \
  template cudaError_t max_reduce_blocks<scalar_t>(int64_t, int64_t*);                    \
  template cudaError_t max_reduce_cuda<scalar_t>(                                         \
      const scalar_t*, int64_t, at::opmath_type<scalar_t>*, int64_t, scalar_t*, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
INSTANTIATE(c10::Half)
INSTANTIATE(c10::BFloat16)
#undef INSTANTIATE

}  // namespace ch3_max_reduce
