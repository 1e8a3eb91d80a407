// reduce_sum.cu: the sum of a tensor on the GPU, as a progression in measured steps after Mark
// Harris's "Optimizing Parallel Reduction in CUDA" (lesson: "A reduction in seven steps"):
//   v0 one atomicAdd per element         every thread queues on one address
//   v1 interleaved tree in shared memory tid % (2s) picks the adders: divergent warps
//   v2 sequential addressing             the first s threads add: whole warps retire together
//   v3 first add during the load         each thread loads two elements: half the blocks
//   v4 warp-level finish                 the last 32 values reduced in registers (__shfl_down_sync)
//   v5 vectorized grid-stride            a grid sized to the GPU, 16-byte loads, 4 in flight
//   v6 deterministic                     v5's blocks write partial sums, one block adds them in
//                                        a fixed order: the same bits on every run
// v0-v5 add their blocks' results with atomicAdd, whose order changes from run to run. Half types
// accumulate in float, float64 in double. Also sum_columns: one sum per column, deterministic.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContextLight.h>  // at::cuda::getCurrentDeviceProperties
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "checks.h"
#include "cuda_ops.h"
#include "launch_utils.cuh"

namespace {

constexpr int kThreads = 256;  // a power of two: the shared-memory trees halve it down to 1
constexpr int kWarp = 32;

// ---- v0: one atomic per element ----------------------------------------------------------------

template <typename scalar_t, typename acc_t>
__global__ void sum_v0_atomic_per_element(const scalar_t* __restrict__ x, int64_t numel,
                                          acc_t* total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < numel) {
    atomicAdd(total, static_cast<acc_t>(x[i]));
  }
}

// ---- v1: interleaved addressing ----------------------------------------------------------------

template <typename scalar_t, typename acc_t>
__global__ void sum_v1_interleaved(const scalar_t* __restrict__ x, int64_t numel, acc_t* total) {
  __shared__ acc_t partial[kThreads];
  const int tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + tid;
  partial[tid] = i < numel ? static_cast<acc_t>(x[i]) : acc_t(0);
  __syncthreads();
  for (int s = 1; s < kThreads; s *= 2) {
    // At step s only every (2s)-th thread works, spread over all warps: every warp stays busy
    // with a few active lanes, and `%` is slow.
    if (tid % (2 * s) == 0) {
      partial[tid] += partial[tid + s];
    }
    __syncthreads();  // the next step reads what this one wrote
  }
  if (tid == 0) atomicAdd(total, partial[0]);
}

// ---- v2: sequential addressing -----------------------------------------------------------------

template <typename scalar_t, typename acc_t>
__global__ void sum_v2_sequential(const scalar_t* __restrict__ x, int64_t numel, acc_t* total) {
  __shared__ acc_t partial[kThreads];
  const int tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + tid;
  partial[tid] = i < numel ? static_cast<acc_t>(x[i]) : acc_t(0);
  __syncthreads();
  // The active threads are the first s: whole warps idle (and skip the branch) together, and
  // consecutive threads touch consecutive words, so no two lanes share a bank.
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (tid < s) {
      partial[tid] += partial[tid + s];
    }
    __syncthreads();
  }
  if (tid == 0) atomicAdd(total, partial[0]);
}

// ---- v3: first add during the load -------------------------------------------------------------

template <typename scalar_t, typename acc_t>
__global__ void sum_v3_first_add_during_load(const scalar_t* __restrict__ x, int64_t numel,
                                             acc_t* total) {
  __shared__ acc_t partial[kThreads];
  const int tid = threadIdx.x;
  // Each block covers 2 * kThreads elements: half of v2's threads sat idle after the load.
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (2 * kThreads) + tid;
  acc_t v = i < numel ? static_cast<acc_t>(x[i]) : acc_t(0);
  if (i + kThreads < numel) v += static_cast<acc_t>(x[i + kThreads]);
  partial[tid] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (tid < s) {
      partial[tid] += partial[tid + s];
    }
    __syncthreads();
  }
  if (tid == 0) atomicAdd(total, partial[0]);
}

// ---- v4: warp-level finish ---------------------------------------------------------------------

// The sum of `v` over the 32 lanes of a warp, in lane 0: each step adds the value `offset` lanes
// up, register to register, with no shared memory and no __syncthreads.
template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

template <typename scalar_t, typename acc_t>
__global__ void sum_v4_warp_shuffle(const scalar_t* __restrict__ x, int64_t numel, acc_t* total) {
  __shared__ acc_t partial[kThreads];
  const int tid = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (2 * kThreads) + tid;
  acc_t v = i < numel ? static_cast<acc_t>(x[i]) : acc_t(0);
  if (i + kThreads < numel) v += static_cast<acc_t>(x[i + kThreads]);
  partial[tid] = v;
  __syncthreads();
  // v3's tree down to 64 values; the barrier steps below that are where v3 spent its time.
  for (int s = kThreads / 2; s > kWarp; s /= 2) {
    if (tid < s) {
      partial[tid] += partial[tid + s];
    }
    __syncthreads();
  }
  if (tid < kWarp) {
    v = warp_sum(partial[tid] + partial[tid + kWarp]);
    if (tid == 0) atomicAdd(total, v);
  }
}

// ---- v5: vectorized grid-stride ----------------------------------------------------------------

// The sum over a whole block, in thread 0: each warp reduces in registers, warp 0 reduces the
// warps' results. Shared memory holds one value per warp.
template <typename acc_t>
__device__ __forceinline__ acc_t block_sum(acc_t v) {
  __shared__ acc_t per_warp[kThreads / kWarp];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / kWarp ? per_warp[threadIdx.x] : acc_t(0);
  return warp == 0 ? warp_sum(v) : acc_t(0);
}

// Each thread's share of x: kUnroll 16-byte loads issued before the first add (memory latency is
// hidden by having many loads in flight), then the elements that do not fill a vector.
template <typename scalar_t, typename acc_t, int kVec>
__device__ __forceinline__ acc_t thread_sum(const scalar_t* __restrict__ x, int64_t numel) {
  constexpr int kUnroll = 4;
  using Vec = course::AlignedVector<scalar_t, kVec>;
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
  return sum;
}

template <typename scalar_t, typename acc_t, int kVec>
__global__ void sum_v5_vectorized_grid_stride(const scalar_t* __restrict__ x, int64_t numel,
                                              acc_t* total) {
  const acc_t v = block_sum(thread_sum<scalar_t, acc_t, kVec>(x, numel));
  if (threadIdx.x == 0) atomicAdd(total, v);
}

// ---- v6: deterministic -------------------------------------------------------------------------

// Pass 1 is v5 without the atomic: block b writes its sum to partials[b].
template <typename scalar_t, typename acc_t, int kVec>
__global__ void sum_v6_partials(const scalar_t* __restrict__ x, int64_t numel,
                                acc_t* __restrict__ partials) {
  const acc_t v = block_sum(thread_sum<scalar_t, acc_t, kVec>(x, numel));
  if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

// Pass 2, one block: thread t adds partials t, t + kThreads, ... in order, then block_sum's fixed
// tree. Same grid, same partials, same order: the same bits every run (on the same GPU, whose SM
// count sets the grid, and for the same alignment of x, which sets the vector width).
template <typename scalar_t, typename acc_t>
__global__ void sum_v6_finish(const acc_t* __restrict__ partials, int64_t count,
                              scalar_t* __restrict__ out) {
  acc_t v = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) v += partials[i];
  v = block_sum(v);
  if (threadIdx.x == 0) *out = static_cast<scalar_t>(v);
}

// ---- sum_columns -------------------------------------------------------------------------------

// x seen as (rows, cols); out[c] = sum over r of x[r, c]. A block is blockDim.x columns x
// blockDim.y row lanes, 32 x 8 by default (cuda_ops.h): a warp reads 32 neighbouring elements of
// one row (coalesced), and the grid's y dimension splits the rows when there are few columns. The
// shape is a launch parameter, so that block_sweep.py can measure others. Pass 1 writes one partial
// per (row split, column).

template <typename scalar_t, typename acc_t>
__global__ void sum_columns_partials(const scalar_t* __restrict__ x, int64_t rows, int64_t cols,
                                     acc_t* __restrict__ partials) {
  // One sum per thread, lane_sums[row lane][column]: dynamic shared memory, sized at the launch.
  extern __shared__ unsigned char lane_sums_bytes[];
  acc_t* lane_sums = reinterpret_cast<acc_t*>(lane_sums_bytes);
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  acc_t v = 0;
  if (col < cols) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows;
         r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
      v += static_cast<acc_t>(x[r * cols + col]);
    }
  }
  lane_sums[threadIdx.y * blockDim.x + threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int lane = 1; lane < static_cast<int>(blockDim.y); ++lane)
      v += lane_sums[lane * blockDim.x + threadIdx.x];
    partials[blockIdx.y * cols + col] = v;
  }
}

// Pass 2: one thread per column adds its row splits' partials in order.
template <typename scalar_t, typename acc_t>
__global__ void sum_columns_finish(const acc_t* __restrict__ partials, int64_t splits, int64_t cols,
                                   scalar_t* __restrict__ out) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  acc_t v = 0;
  for (int64_t s = 0; s < splits; ++s) v += partials[s * cols + col];
  out[col] = static_cast<scalar_t>(v);
}

// ---- launchers ---------------------------------------------------------------------------------

// A block: at most 1024 threads, and at most 1024 in x and in y (64 in z).
void check_block_shape(int64_t block_x, int64_t block_y, const char* op) {
  TORCH_CHECK(block_x >= 1 && block_y >= 1 && block_x * block_y <= 1024, op,
              ": a block must have 1 to 1024 threads, got block_x = ", block_x,
              ", block_y = ", block_y);
}

// How many blocks of sum_columns_partials fit on one SM: blocks_to_fill_gpu's question, with the
// shared memory this shape asks for at its launch.
template <typename scalar_t>
int64_t sum_columns_blocks_per_sm_typed(int64_t block_x, int64_t block_y) {
  using acc_t = at::opmath_type<scalar_t>;
  int blocks_per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks_per_sm, sum_columns_partials<scalar_t, acc_t>, static_cast<int>(block_x * block_y),
      block_x * block_y * sizeof(acc_t)));
  return blocks_per_sm;
}

template <typename scalar_t>
at::Tensor sum_typed(const at::Tensor& x, cuda_ops::SumVersion version, cudaStream_t stream) {
  using acc_t = at::opmath_type<scalar_t>;
  using V = cuda_ops::SumVersion;
  const int64_t numel = x.numel();
  const scalar_t* data = x.const_data_ptr<scalar_t>();
  const auto acc_options = x.options().dtype(c10::CppTypeToScalarType<acc_t>::value);

  if (version == V::v6_deterministic) {
    at::Tensor out = at::empty({}, x.options());
    course::with_vector_width<scalar_t>({data}, 0, [&](auto width) {
      auto kernel = sum_v6_partials<scalar_t, acc_t, decltype(width)::value>;
      const int64_t blocks =
          std::max<int64_t>(1, std::min(course::ceil_div(numel / width, kThreads),
                                        course::blocks_to_fill_gpu(kernel, kThreads)));
      at::Tensor partials = at::empty({blocks}, acc_options);
      kernel<<<blocks, kThreads, 0, stream>>>(data, numel, partials.mutable_data_ptr<acc_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      sum_v6_finish<scalar_t, acc_t><<<1, kThreads, 0, stream>>>(
          partials.const_data_ptr<acc_t>(), blocks, out.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return out;
  }

  // v0-v5 accumulate into one zeroed value of the accumulation type, converted at the end.
  at::Tensor total = at::zeros({}, acc_options);
  acc_t* total_ptr = total.mutable_data_ptr<acc_t>();
  const int64_t one_per_thread = course::ceil_div(numel, kThreads);
  const int64_t two_per_thread = course::ceil_div(numel, 2 * kThreads);
  switch (version) {
    case V::v0_atomic_per_element:
      sum_v0_atomic_per_element<<<one_per_thread, kThreads, 0, stream>>>(data, numel, total_ptr);
      break;
    case V::v1_interleaved:
      sum_v1_interleaved<<<one_per_thread, kThreads, 0, stream>>>(data, numel, total_ptr);
      break;
    case V::v2_sequential:
      sum_v2_sequential<<<one_per_thread, kThreads, 0, stream>>>(data, numel, total_ptr);
      break;
    case V::v3_first_add_during_load:
      sum_v3_first_add_during_load<<<two_per_thread, kThreads, 0, stream>>>(data, numel, total_ptr);
      break;
    case V::v4_warp_shuffle:
      sum_v4_warp_shuffle<<<two_per_thread, kThreads, 0, stream>>>(data, numel, total_ptr);
      break;
    case V::v5_vectorized_grid_stride:
      course::with_vector_width<scalar_t>({data}, 0, [&](auto width) {
        auto kernel = sum_v5_vectorized_grid_stride<scalar_t, acc_t, decltype(width)::value>;
        const int64_t blocks =
            std::max<int64_t>(1, std::min(course::ceil_div(numel / width, kThreads),
                                          course::blocks_to_fill_gpu(kernel, kThreads)));
        kernel<<<blocks, kThreads, 0, stream>>>(data, numel, total_ptr);
      });
      break;
    default:
      TORCH_CHECK(false, "sum: unknown version");
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return total.to(x.scalar_type());
}

}  // namespace

namespace cuda_ops {

at::Tensor sum(const at::Tensor& x_in, SumVersion version) {
  course::check_cuda(x_in, "sum", "x");
  course::check_floating(x_in, "sum", "x");
  // v0-v4 launch one thread per element or per two: their grids overflow past ~5e11 elements,
  // far beyond any GPU's memory, so no check here. v5 and v6 size their grid to the GPU.
  if (x_in.numel() == 0) return at::zeros({}, x_in.options());
  const at::Tensor x = x_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "sum",
                                  [&] { out = sum_typed<scalar_t>(x, version, stream); });
  return out;
}

at::Tensor sum_columns(const at::Tensor& x_in, int64_t block_x, int64_t block_y) {
  course::check_cuda(x_in, "sum_columns", "x");
  course::check_floating(x_in, "sum_columns", "x");
  TORCH_CHECK(x_in.dim() >= 1, "sum_columns: x must have at least 1 dimension, got a 0-dim tensor");
  check_block_shape(block_x, block_y, "sum_columns");
  const int64_t cols = x_in.size(-1);
  const int64_t rows = cols == 0 ? 0 : x_in.numel() / cols;
  if (rows == 0 || cols == 0) return at::zeros({cols}, x_in.options());
  const at::Tensor x = x_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor out = at::empty({cols}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "sum_columns", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    auto kernel = sum_columns_partials<scalar_t, acc_t>;
    const dim3 block(block_x, block_y);
    const size_t shared_bytes = block_x * block_y * sizeof(acc_t);
    const int64_t column_blocks = course::ceil_div(cols, block_x);
    TORCH_CHECK(column_blocks <= std::numeric_limits<int32_t>::max(),
                "sum_columns: too many columns (", cols, ")");
    // Split the rows until the grid fills the GPU (capped: each split costs a partial per column).
    const int64_t fill = at::cuda::getCurrentDeviceProperties()->multiProcessorCount *
                         sum_columns_blocks_per_sm_typed<scalar_t>(block_x, block_y);
    const int64_t splits = std::clamp<int64_t>(
        fill / column_blocks, 1, std::min<int64_t>(course::ceil_div(rows, block_y), 1024));
    at::Tensor partials =
        at::empty({splits, cols}, x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    kernel<<<dim3(column_blocks, splits), block, shared_bytes, stream>>>(
        x.const_data_ptr<scalar_t>(), rows, cols, partials.mutable_data_ptr<acc_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    sum_columns_finish<scalar_t, acc_t><<<course::ceil_div(cols, kThreads), kThreads, 0, stream>>>(
        partials.const_data_ptr<acc_t>(), splits, cols, out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

int64_t sum_columns_blocks_per_sm(const at::Tensor& x, int64_t block_x, int64_t block_y) {
  course::check_cuda(x, "sum_columns_blocks_per_sm", "x");
  check_block_shape(block_x, block_y, "sum_columns_blocks_per_sm");
  const c10::cuda::CUDAGuard device_guard(x.device());
  int64_t blocks_per_sm = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "sum_columns_blocks_per_sm",
      [&] { blocks_per_sm = sum_columns_blocks_per_sm_typed<scalar_t>(block_x, block_y); });
  return blocks_per_sm;
}

}  // namespace cuda_ops
