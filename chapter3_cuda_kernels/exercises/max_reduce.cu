// Exercise ch3/max_reduce: the maximum of all elements, on the CPU and as a two-pass CUDA
// reduction: warp shuffles, then shared memory across warps, one partial per block; then one block
// reduces the partials. Statement and hints: chapter 3's lesson, "Exercises". Write the two TODOs.
// Check it: make check EX=ch3/max_reduce    (its checks and speed target: check_max_reduce.py)
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

// TODO 1: the larger of a and b, and NaN if either is NaN (torch.max's rule). The CPU loop and
// the kernel below both call it, so the CPU checks test it on any machine. The line below is the
// textbook maximum: work out what it returns when a, or b, is NaN.
template <typename opmath_t>
__host__ __device__ inline opmath_t max_propagate_nan(opmath_t a, opmath_t b) {
  return a > b ? a : b;  // replace: NaN if a or b is NaN, else the larger
}

// TODO 2: out[blockIdx.x] = max_propagate_nan over the elements this block's threads visit.
// Launched twice (see launch_max_reduce): over x, writing one partial per block in opmath_t; then
// as one block over the partials, writing the result in x's type. Indices are int64_t.
//   1. Each thread: a maximum m in opmath_t, from the identity of max, over x[i] for i = its
//      global index, then + the grid's size, while i < numel (a grid-stride loop). Issue kUnroll
//      loads before the first comparison: one load at a time leaves the memory waiting.
//   2. Each warp: combine m with __shfl_down_sync(0xffffffffu, m, offset) for offsets 16 down to
//      1; lane 0 then holds the warp's maximum and writes it to a __shared__ array, one per warp.
//   3. After __syncthreads(), warp 0 reduces those kThreads / kWarp values the same way, and its
//      lane 0 writes out[blockIdx.x].
template <typename in_t, typename out_t>
__global__ void max_reduce_kernel(const in_t* __restrict__ x, int64_t numel,
                                  out_t* __restrict__ out) {
  using opmath_t = at::opmath_type<in_t>;
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
