// fused_bias_relu.cu: out = relu(x * scale + bias) on the GPU, bias over the last dimension, in
// four versions that diff cleanly (lesson: "Threads, blocks and a grid: v1" onwards):
//   v1 one thread per element     the direct port: a grid as large as the tensor
//   v2 grid-stride loop           a grid sized to the GPU; each thread walks the tensor
//   v3 vectorized                 v2 moving 16 bytes per load and store, no division in the loop
//   v4 a block per tile           v3's vectors in rows: a thread's bias vector stays in
//                                 registers, and the grid covers the whole tensor, a block per tile
// Each launcher: checks, device guard, current stream, C10_CUDA_KERNEL_LAUNCH_CHECK. Indices are
// 64-bit throughout: a tensor may have more than 2^31 elements. Built by load_chapter3.py.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
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

constexpr int kThreads = 256;  // a multiple of the warp size; 8 blocks fill an SM's 2048 threads

// The arithmetic, shared by all versions. Half types are computed in float (opmath_t) and rounded
// once on return; `v < 0 ? 0 : v` keeps NaN, like torch.relu.
template <typename scalar_t, typename opmath_t>
__device__ __forceinline__ scalar_t bias_relu(scalar_t x, scalar_t bias, opmath_t scale) {
  const opmath_t v = static_cast<opmath_t>(x) * scale + static_cast<opmath_t>(bias);
  return static_cast<scalar_t>(v < opmath_t(0) ? opmath_t(0) : v);
}

// ---- v1: one thread per element ----------------------------------------------------------------

template <typename scalar_t, typename opmath_t>
__global__ void fused_bias_relu_v1_one_thread_per_element(const scalar_t* __restrict__ x,
                                                          const scalar_t* __restrict__ bias,
                                                          scalar_t* __restrict__ out, int64_t numel,
                                                          int64_t cols, opmath_t scale) {
  // The cast comes first: blockIdx.x * blockDim.x in 32 bits wraps past 2^32 elements.
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < numel) {
    out[i] = bias_relu(x[i], bias[i % cols], scale);
  }
}

// ---- v2: grid-stride loop ----------------------------------------------------------------------

template <typename scalar_t, typename opmath_t>
__global__ void fused_bias_relu_v2_grid_stride(const scalar_t* __restrict__ x,
                                               const scalar_t* __restrict__ bias,
                                               scalar_t* __restrict__ out, int64_t numel,
                                               int64_t cols, opmath_t scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    out[i] = bias_relu(x[i], bias[i % cols], scale);
  }
}

// ---- v3: vectorized ----------------------------------------------------------------------------

template <typename scalar_t, typename opmath_t, int kVec>
__global__ void fused_bias_relu_v3_vectorized(const scalar_t* __restrict__ x,
                                              const scalar_t* __restrict__ bias,
                                              scalar_t* __restrict__ out, int64_t numel,
                                              int64_t cols, opmath_t scale) {
  using Vec = course::AlignedVector<scalar_t, kVec>;
  const int64_t num_vecs = numel / kVec;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // The column of a vector's first element, kept up to date by addition: a 64-bit `%` costs
  // dozens of instructions, and v1/v2 pay one per element. Both steps are < cols, so one
  // subtraction wraps them.
  const int64_t col_step = (stride * kVec) % cols;
  int64_t col = (first * kVec) % cols;
  for (int64_t v = first; v < num_vecs; v += stride) {
    const Vec in = reinterpret_cast<const Vec*>(x)[v];
    Vec result;
    int64_t c = col;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      result.val[k] = bias_relu(in.val[k], bias[c], scale);
      c = (c + 1 == cols) ? 0 : c + 1;
    }
    reinterpret_cast<Vec*>(out)[v] = result;
    col += col_step;
    col = col >= cols ? col - cols : col;
  }
  // The last numel % kVec elements (fewer than kVec): one each for the first threads of the grid.
  const int64_t tail = num_vecs * kVec + first;
  if (tail < numel) {
    out[tail] = bias_relu(x[tail], bias[tail % cols], scale);
  }
}

// ---- v4: a block per tile ----------------------------------------------------------------------

// A block is kColumnThreads x (kThreads / kColumnThreads) threads and covers a tile of that many
// vectors: thread (tx, ty) owns the vector of columns blockIdx.x * blockDim.x + tx, loads its bias
// once, and handles row blockIdx.y * blockDim.y + ty. The host picks kVec dividing cols, so a
// vector never straddles two rows and no column index is ever divided. The host launches a block
// per tile, so the loop below runs once; it loops only past 65,535 row tiles, the most a grid's y
// can hold.
constexpr int kColumnThreads = 32;  // a warp reads 32 neighbouring vectors: 512 contiguous bytes

template <typename scalar_t, typename opmath_t, int kVec>
__global__ void fused_bias_relu_v4_block_per_tile(const scalar_t* __restrict__ x,
                                                  const scalar_t* __restrict__ bias,
                                                  scalar_t* __restrict__ out, int64_t rows,
                                                  int64_t vec_cols, opmath_t scale) {
  using Vec = course::AlignedVector<scalar_t, kVec>;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= vec_cols) return;
  const Vec b = reinterpret_cast<const Vec*>(bias)[col];
  const int64_t row_stride = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; row < rows;
       row += row_stride) {
    const Vec in = reinterpret_cast<const Vec*>(x)[row * vec_cols + col];
    Vec result;
#pragma unroll
    for (int k = 0; k < kVec; ++k) result.val[k] = bias_relu(in.val[k], b.val[k], scale);
    reinterpret_cast<Vec*>(out)[row * vec_cols + col] = result;
  }
}

// ---- launchers ---------------------------------------------------------------------------------

// A block holds 1 to 1024 threads on every GPU since compute capability 2.0.
void check_threads_per_block(int64_t threads, const char* op) {
  TORCH_CHECK(threads >= 1 && threads <= 1024, op,
              ": threads must be 1 to 1024 (a block's limit), got ", threads);
}

// What every launcher does before its launch: check, make contiguous (the kernels index
// memory as rows of `cols`; a view is copied, as in chapter 2), allocate, and guard the device.
struct Prepared {
  at::Tensor x, bias, out;
  int64_t numel = 0, cols = 0;
};

Prepared prepare(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  course::check_cuda(x, op, "x");
  course::check_bias_op(x, bias, op);
  Prepared p{x.contiguous(), bias.contiguous(), at::empty_like(x, at::MemoryFormat::Contiguous)};
  p.numel = x.numel();
  p.cols = x.size(-1);
  return p;
}

// `threads` is the block size: kThreads unless block_sweep.py measures another.
template <typename scalar_t, int kVec>
void launch_v3(const Prepared& p, at::opmath_type<scalar_t> scale, cudaStream_t stream,
               int threads) {
  using opmath_t = at::opmath_type<scalar_t>;
  auto kernel = fused_bias_relu_v3_vectorized<scalar_t, opmath_t, kVec>;
  const int64_t vec_blocks = std::max<int64_t>(1, course::ceil_div(p.numel / kVec, threads));
  const int64_t blocks = std::min(vec_blocks, course::blocks_to_fill_gpu(kernel, threads));
  kernel<<<blocks, threads, 0, stream>>>(
      p.x.const_data_ptr<scalar_t>(), p.bias.const_data_ptr<scalar_t>(),
      p.out.mutable_data_ptr<scalar_t>(), p.numel, p.cols, scale);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, int kVec>
void launch_v4(const Prepared& p, at::opmath_type<scalar_t> scale, cudaStream_t stream,
               bool gpu_sized_grid) {
  using opmath_t = at::opmath_type<scalar_t>;
  auto kernel = fused_bias_relu_v4_block_per_tile<scalar_t, opmath_t, kVec>;
  const int64_t rows = p.numel / p.cols, vec_cols = p.cols / kVec;
  // Narrow rows (fewer than 32 vectors) get narrower, taller blocks, so that no thread idles.
  int column_threads = 1;
  while (column_threads < kColumnThreads && column_threads < vec_cols) column_threads *= 2;
  const dim3 block(column_threads, kThreads / column_threads);
  const int64_t column_blocks = course::ceil_div(vec_cols, column_threads);
  TORCH_CHECK(column_blocks <= std::numeric_limits<int32_t>::max(),
              "fused_bias_relu_v4: x.size(-1) is too large (", p.cols, ")");
  // A block per tile of rows. gpu_sized_grid launches v2's grid instead (only as many blocks as
  // fit on the GPU at once, each looping over many tiles): the lesson's comparison of the two.
  int64_t row_blocks = std::min<int64_t>(course::ceil_div(rows, block.y), 65535);
  if (gpu_sized_grid) {
    row_blocks = std::clamp<int64_t>(course::blocks_to_fill_gpu(kernel, kThreads) / column_blocks,
                                     1, row_blocks);
  }
  kernel<<<dim3(column_blocks, row_blocks), block, 0, stream>>>(
      p.x.const_data_ptr<scalar_t>(), p.bias.const_data_ptr<scalar_t>(),
      p.out.mutable_data_ptr<scalar_t>(), rows, vec_cols, scale);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// v4's entry points share everything but the grid.
at::Tensor fused_bias_relu_v4_launch(const at::Tensor& x, const at::Tensor& bias, double scale,
                                     bool gpu_sized_grid, const char* op) {
  Prepared p = prepare(x, bias, op);
  if (p.numel == 0) return p.out;
  const c10::cuda::CUDAGuard device_guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_v4", [&] {
        const auto s = static_cast<at::opmath_type<scalar_t>>(scale);
        // As v3, and the bias too must be aligned, and the width must divide a row.
        course::with_vector_width<scalar_t>(
            {p.x.const_data_ptr(), p.bias.const_data_ptr(), p.out.const_data_ptr()}, p.cols,
            [&](auto width) {
              launch_v4<scalar_t, decltype(width)::value>(p, s, stream, gpu_sized_grid);
            });
      });
  return p.out;
}

}  // namespace

namespace cuda_ops {

at::Tensor fused_bias_relu_v1(const at::Tensor& x, const at::Tensor& bias, double scale) {
  Prepared p = prepare(x, bias, "fused_bias_relu_v1");
  if (p.numel == 0) return p.out;
  const c10::cuda::CUDAGuard device_guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t blocks = course::ceil_div(p.numel, kThreads);
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(),
              "fused_bias_relu_v1: x has too many elements for one thread each (", p.numel,
              "); v2 to v4 have no such limit");
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_v1", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        fused_bias_relu_v1_one_thread_per_element<<<blocks, kThreads, 0, stream>>>(
            p.x.const_data_ptr<scalar_t>(), p.bias.const_data_ptr<scalar_t>(),
            p.out.mutable_data_ptr<scalar_t>(), p.numel, p.cols, static_cast<opmath_t>(scale));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return p.out;
}

at::Tensor fused_bias_relu_v2(const at::Tensor& x, const at::Tensor& bias, double scale) {
  Prepared p = prepare(x, bias, "fused_bias_relu_v2");
  if (p.numel == 0) return p.out;
  const c10::cuda::CUDAGuard device_guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_v2", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        auto kernel = fused_bias_relu_v2_grid_stride<scalar_t, opmath_t>;
        const int64_t blocks = std::min(course::ceil_div(p.numel, kThreads),
                                        course::blocks_to_fill_gpu(kernel, kThreads));
        kernel<<<blocks, kThreads, 0, stream>>>(
            p.x.const_data_ptr<scalar_t>(), p.bias.const_data_ptr<scalar_t>(),
            p.out.mutable_data_ptr<scalar_t>(), p.numel, p.cols, static_cast<opmath_t>(scale));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return p.out;
}

at::Tensor fused_bias_relu_v3(const at::Tensor& x, const at::Tensor& bias, double scale,
                              int64_t threads) {
  Prepared p = prepare(x, bias, "fused_bias_relu_v3");
  check_threads_per_block(threads, "fused_bias_relu_v3");
  if (p.numel == 0) return p.out;
  const c10::cuda::CUDAGuard device_guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_v3", [&] {
        const auto s = static_cast<at::opmath_type<scalar_t>>(scale);
        // The widest vector both x and out are aligned to; a misaligned view (x[1:]) runs the
        // same kernel one element at a time. One instantiation per width that fits in 16 bytes.
        course::with_vector_width<scalar_t>(
            {p.x.const_data_ptr(), p.out.const_data_ptr()}, 0, [&](auto width) {
              launch_v3<scalar_t, decltype(width)::value>(p, s, stream, static_cast<int>(threads));
            });
      });
  return p.out;
}

int64_t fused_bias_relu_v3_blocks_per_sm(const at::Tensor& x, int64_t threads) {
  course::check_cuda(x, "fused_bias_relu_v3_blocks_per_sm", "x");
  check_threads_per_block(threads, "fused_bias_relu_v3_blocks_per_sm");
  const c10::cuda::CUDAGuard device_guard(x.device());
  int blocks_per_sm = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_v3_blocks_per_sm", [&] {
        // The instantiation fused_bias_relu_v3 would launch for x: its registers set the limit.
        course::with_vector_width<scalar_t>({x.const_data_ptr()}, 0, [&](auto width) {
          auto kernel = fused_bias_relu_v3_vectorized<scalar_t, at::opmath_type<scalar_t>,
                                                      decltype(width)::value>;
          C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &blocks_per_sm, kernel, static_cast<int>(threads), 0));
        });
      });
  return blocks_per_sm;
}

at::Tensor fused_bias_relu_v4(const at::Tensor& x, const at::Tensor& bias, double scale) {
  return fused_bias_relu_v4_launch(x, bias, scale, /*gpu_sized_grid=*/false, "fused_bias_relu_v4");
}

at::Tensor fused_bias_relu_v4_gpu_sized_grid(const at::Tensor& x, const at::Tensor& bias,
                                             double scale) {
  return fused_bias_relu_v4_launch(x, bias, scale, /*gpu_sized_grid=*/true,
                                   "fused_bias_relu_v4_gpu_sized_grid");
}

}  // namespace cuda_ops
