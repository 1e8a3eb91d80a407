// reduce_sum.cu: the sum of all elements for CUDA tensors, chapter 3's final version (v6): pass 1,
// a grid sized to the GPU, each thread summing 16-byte vectors, each block its threads' sums into
// one partial; pass 2, one block adds the partials in a fixed order. The same bits on every run;
// half types accumulate in float. CPU: csrc/reduce_sum.cpp.

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "../checks.h"
#include "launch_utils.cuh"

namespace custom_ops::cuda {
namespace {

constexpr int kWarp = 32;

template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffff, v, offset);
  return v;
}

// The sum over the block, valid in thread 0: warps reduce in registers, warp 0 adds the warps'.
template <typename acc_t>
__device__ __forceinline__ acc_t block_sum(acc_t v) {
  __shared__ acc_t per_warp[kThreads / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / kWarp ? per_warp[threadIdx.x] : acc_t(0);
  return warp == 0 ? warp_sum(v) : acc_t(0);
}

// Pass 1: kUnroll 16-byte loads in flight per thread before the first add (latency hiding), then
// the elements that do not fill a vector; block b writes its sum to partials[b].
template <typename scalar_t, typename acc_t, int kVec>
__global__ void sum_partials_kernel(const scalar_t* __restrict__ x, int64_t numel,
                                    acc_t* __restrict__ partials) {
  constexpr int kUnroll = 4;
  using Vec = AlignedVector<scalar_t, kVec>;
  const Vec* xv = reinterpret_cast<const Vec*>(x);
  const int64_t num_vecs = numel / kVec;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  acc_t sum = 0;
  for (int64_t base = first; base < num_vecs; base += stride * kUnroll) {
    Vec in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + u * stride;
      if (v < num_vecs) {
        in[u] = xv[v];
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) in[u].val[k] = scalar_t(0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum += static_cast<acc_t>(in[u].val[k]);
    }
  }
  const int64_t tail = num_vecs * kVec + first;
  if (tail < numel) sum += static_cast<acc_t>(x[tail]);
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Pass 2, one block: thread t adds partials t, t + kThreads, ... in order, then a fixed tree.
template <typename scalar_t, typename acc_t>
__global__ void sum_finish_kernel(const acc_t* __restrict__ partials, int64_t count,
                                  scalar_t* __restrict__ out) {
  acc_t v = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) v += partials[i];
  v = block_sum(v);
  if (threadIdx.x == 0) *out = static_cast<scalar_t>(v);
}

at::Tensor reduce_sum_cuda(const at::Tensor& x) {
  check_floating(x, "reduce_sum", "x");
  check_contiguous(x, "reduce_sum", "x");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty({}, x.options());
  const int64_t numel = x.numel();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "reduce_sum", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    with_vector_width<scalar_t>({x.const_data_ptr()}, 0, [&](auto width) {
      constexpr int kVec = decltype(width)::value;
      auto kernel = sum_partials_kernel<scalar_t, acc_t, kVec>;
      // An empty x still runs one block: its partial is 0, and so is the sum.
      const int64_t blocks = std::max<int64_t>(
          1, std::min(ceil_div(numel / kVec, kThreads), blocks_to_fill_gpu(kernel, kThreads)));
      at::Tensor partials =
          at::empty({blocks}, x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
      kernel<<<blocks, kThreads, 0, stream>>>(x.const_data_ptr<scalar_t>(), numel,
                                              partials.mutable_data_ptr<acc_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      sum_finish_kernel<scalar_t, acc_t><<<1, kThreads, 0, stream>>>(
          partials.const_data_ptr<acc_t>(), blocks, out.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) { m.impl("reduce_sum", &reduce_sum_cuda); }

}  // namespace custom_ops::cuda
