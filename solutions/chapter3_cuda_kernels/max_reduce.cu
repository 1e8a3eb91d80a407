// Exercise ch3/max_reduce, reference solution: the maximum of all elements, on the CPU and as a
// two-pass CUDA reduction: warp shuffles, then shared memory across warps, one partial per block;
// then one block reduces the partials. Statement: chapter 3's lesson, "Exercises".
// Check it: make check EX=ch3/max_reduce SOLUTION=1
//
//   the reference: torch.amax(x), a 0-dim tensor of x's dtype; NaN if any element is NaN

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace {

constexpr int kThreads = 256;  // a multiple of the warp size: every warp is full
constexpr int kWarp = 32;
constexpr int kUnroll = 4;  // loads each thread issues before it uses the first

// TODO 1 (solved): the larger of a and b, and NaN if either is NaN (torch.max's rule). `a > b`
// is false whenever a NaN is involved, so the textbook `a > b ? a : b` returns b: a NaN in b
// survives, a NaN in a (the maximum so far) is dropped by the next element. `a != a` is true
// only for NaN.
template <typename opmath_t>
__host__ __device__ inline opmath_t max_propagate_nan(opmath_t a, opmath_t b) {
  return (a != a || a > b) ? a : b;
}

// TODO 2 (solved): out[blockIdx.x] = the maximum of the elements this block's threads visit.
// Launched twice: over x, one partial per block, in opmath_t; then as one block over the partials,
// writing the result in x's type. Every thread starts at -inf, the identity of max (0 would be
// wrong for an all-negative tensor), and threads with no elements keep it.
template <typename in_t, typename out_t>
__global__ void max_reduce_kernel(const in_t* __restrict__ x, int64_t numel,
                                  out_t* __restrict__ out) {
  using opmath_t = at::opmath_type<in_t>;
  constexpr opmath_t kLowest = -std::numeric_limits<opmath_t>::infinity();
  __shared__ opmath_t per_warp[kThreads / kWarp];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;

  // Each thread's share: kUnroll loads in flight before the first comparison, so that the memory
  // has enough requests to work on (one at a time leaves it waiting on latency).
  opmath_t m = kLowest;
  for (int64_t base = first; base < numel; base += kUnroll * stride) {
    opmath_t v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * stride;
      v[u] = i < numel ? static_cast<opmath_t>(x[i]) : kLowest;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) m = max_propagate_nan(m, v[u]);
  }

  // The warp's maximum, in lane 0: each step combines the value `offset` lanes up, register to
  // register.
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    m = max_propagate_nan(m, __shfl_down_sync(0xffffffffu, m, offset));
  }
  if (lane == 0) per_warp[warp] = m;
  __syncthreads();  // warp 0 reads what the other warps' lane 0 wrote
  if (warp == 0) {
    m = lane < kThreads / kWarp ? per_warp[lane] : kLowest;
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      m = max_propagate_nan(m, __shfl_down_sync(0xffffffffu, m, offset));
    }
    if (lane == 0) out[blockIdx.x] = static_cast<out_t>(m);
  }
}

// ---- given: the launches, the CPU loop, the checks, the registration ---------------------------

template <typename scalar_t>
void launch_max_reduce(const at::Tensor& x, at::Tensor& out) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t numel = x.numel();
  auto* partials_kernel = max_reduce_kernel<scalar_t, opmath_t>;
  // One full wave of blocks: as many as every SM holds at once (the occupancy API asks the
  // runtime), fewer for a small tensor. The grid-stride loop covers the rest, and few blocks
  // mean few partials for the second pass.
  int blocks_per_sm = 0;
  int sm_count = 0;
  C10_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, partials_kernel, kThreads, 0));
  C10_CUDA_CHECK(
      cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, x.device().index()));
  const int64_t blocks =
      std::clamp<int64_t>((numel + kThreads - 1) / kThreads, 1,
                          std::max<int64_t>(1, int64_t{sm_count} * blocks_per_sm));
  at::Tensor partials =
      at::empty({blocks}, x.options().dtype(c10::CppTypeToScalarType<opmath_t>::value));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  partials_kernel<<<blocks, kThreads, 0, stream>>>(x.const_data_ptr<scalar_t>(), numel,
                                                   partials.mutable_data_ptr<opmath_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // One block over the partials, on the same stream, so it runs after the first pass. No atomics:
  // CUDA has no atomicMax for floating point, and this writes the result once.
  max_reduce_kernel<opmath_t, scalar_t><<<1, kThreads, 0, stream>>>(
      partials.const_data_ptr<opmath_t>(), blocks, out.mutable_data_ptr<scalar_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor max_reduce(const at::Tensor& x_in) {
  TORCH_CHECK(x_in.scalar_type() == at::kFloat || x_in.scalar_type() == at::kDouble ||
                  x_in.scalar_type() == at::kHalf || x_in.scalar_type() == at::kBFloat16,
              "max_reduce: x must be float32, float64, float16 or bfloat16, got ",
              x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() || x_in.is_cuda(),
              "max_reduce: x must be on the CPU or a CUDA device, got ", x_in.device());
  TORCH_CHECK(x_in.numel() > 0, "max_reduce: x is empty; the maximum of no elements is undefined");
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty({}, x.options());  // a 0-dim tensor, like torch.amax(x)
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "max_reduce", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    if (x.is_cuda()) {
      const c10::cuda::CUDAGuard guard(x.device());
      launch_max_reduce<scalar_t>(x, out);
      return;
    }
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    // Each CPU thread reduces a chunk from -inf; the chunks' results are then combined in order.
    const opmath_t result = at::parallel_reduce(
        0, x.numel(), 32768, -std::numeric_limits<opmath_t>::infinity(),
        [&](int64_t begin, int64_t end, opmath_t m) {
          for (int64_t i = begin; i < end; ++i) {
            m = max_propagate_nan(m, static_cast<opmath_t>(x_data[i]));
          }
          return m;
        },
        max_propagate_nan<opmath_t>);
    *out.mutable_data_ptr<scalar_t>() = static_cast<scalar_t>(result);
  });
  return out;
}

}  // namespace

// The op as torch.ops.ch3_max_reduce.max_reduce (chapter 5 explains TORCH_LIBRARY; here it is
// only a way in).
TORCH_LIBRARY(ch3_max_reduce, m) { m.def("max_reduce(Tensor x) -> Tensor", &max_reduce); }
