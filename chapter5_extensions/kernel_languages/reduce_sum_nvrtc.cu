// reduce_sum for NVRTC: the sum of all elements, custom_ops' one-launch deterministic sum
// (csrc/cuda/reduce_sum.cu) without ATen. nvrtc_reduce_sum.py reads this file as text and compiles
// it in the Python process, one instantiation per dtype and vector width. Lesson: chapter 5,
// further/kernel_languages.md.

#include "nvrtc_common.cuh"  // OpMath (what each element is summed in), Vec

constexpr int kWarp = 32;
constexpr int kSumThreads = 512;  // the op launches blocks of this many threads
constexpr int kSumUnroll = 2;     // 16-byte loads per thread in flight before the first add

template <typename A>
__device__ A warp_sum(A v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffff, v, offset);
  return v;
}

// The block's sum, valid in thread 0.
template <typename A>
__device__ A block_sum(A v) {
  __shared__ A per_warp[kSumThreads / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  v = threadIdx.x < kSumThreads / kWarp ? per_warp[threadIdx.x] : A(0);
  return warp == 0 ? warp_sum(v) : A(0);
}

// Each thread sums 16-byte vectors into one accumulator per lane; each block writes its partial;
// the last block to finish (blocks_done counts them from 0) adds the partials in block order, so
// the result is the same bits on every run. numel is an int: the op refuses 2^31 elements or more.
template <typename T, int kVec>
__global__ void __launch_bounds__(kSumThreads)
    sum_kernel(const T* __restrict__ x, int numel, typename OpMath<T>::type* __restrict__ partials,
               unsigned int* __restrict__ blocks_done, T* __restrict__ out) {
  using A = typename OpMath<T>::type;
  using V = Vec<T, kVec>;
  const V* xv = reinterpret_cast<const V*>(x);
  const long long num_vecs = numel / kVec;
  const long long first = static_cast<long long>(blockIdx.x) * kSumThreads + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * kSumThreads;
  A lane_sums[kVec] = {};
  long long v = first;
  for (; v + (kSumUnroll - 1) * stride < num_vecs; v += kSumUnroll * stride) {
    V in[kSumUnroll];
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) in[u] = xv[v + u * stride];
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u)
#pragma unroll
      for (int k = 0; k < kVec; ++k) lane_sums[k] += OpMath<T>::load(in[u].val[k]);
  }
  for (; v < num_vecs; v += stride)
#pragma unroll
    for (int k = 0; k < kVec; ++k) lane_sums[k] += OpMath<T>::load(xv[v].val[k]);
  A sum = 0;
#pragma unroll
  for (int k = 0; k < kVec; ++k) sum += lane_sums[k];
  const long long tail = num_vecs * kVec + first;  // the elements that do not fill a vector
  if (tail < numel) sum += OpMath<T>::load(x[tail]);
  sum = block_sum(sum);
  if (gridDim.x == 1) {  // one block: no partials, no counter
    if (threadIdx.x == 0) *out = OpMath<T>::store(sum);
    return;
  }
  __shared__ bool is_last_block;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    __threadfence();  // the partial is visible to every block before the count says it is there
    is_last_block = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last_block) return;
  __threadfence();  // no read of a partial moves before the count was seen
  A total = 0;
  for (int i = threadIdx.x; i < gridDim.x; i += kSumThreads) total += __ldcg(&partials[i]);
  total = block_sum(total);
  if (threadIdx.x == 0) *out = OpMath<T>::store(total);
}
