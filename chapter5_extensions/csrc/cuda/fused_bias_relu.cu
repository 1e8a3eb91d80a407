// fused_bias_relu.cu: y = relu(x * scale + bias) and its backward for CUDA tensors: chapter 3's
// fastest forward (v4, a block per tile; v3 where rows are not whole 16-byte vectors) and
// chapter 4's one-pass backward with a deterministic bias gradient, now in one launch.
// CPU: csrc/fused_bias_relu.cpp.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

#include "../checks.h"
#include "launch_utils.cuh"

namespace custom_ops::cuda {
namespace {

// Chapter 3's v4, a block per tile. A block is kColumnThreads x (kThreads / kColumnThreads)
// threads; thread (tx, ty) owns one vector of kVec neighbouring columns, loads its bias once, and
// handles row blockIdx.y * blockDim.y + ty. The host picks kVec dividing cols, so a vector never
// straddles two rows, and launches a block per tile: the loop runs once (more only past 65,535
// row tiles, the most a grid's y can hold).
constexpr int kColumnThreads = 32;

template <typename scalar_t, typename opmath_t, int kVec>
__global__ void fused_bias_relu_kernel(const scalar_t* __restrict__ x,
                                       const scalar_t* __restrict__ bias, scalar_t* __restrict__ y,
                                       int64_t rows, int64_t vec_cols, opmath_t scale) {
  using Vec = AlignedVector<scalar_t, kVec>;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= vec_cols) return;
  const Vec b = reinterpret_cast<const Vec*>(bias)[col];
  const int64_t row_stride = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; row < rows;
       row += row_stride) {
    const Vec in = reinterpret_cast<const Vec*>(x)[row * vec_cols + col];
    Vec out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const opmath_t v = static_cast<opmath_t>(in.val[k]) * scale + static_cast<opmath_t>(b.val[k]);
      out.val[k] = static_cast<scalar_t>(v < opmath_t(0) ? opmath_t(0) : v);
    }
    reinterpret_cast<Vec*>(y)[row * vec_cols + col] = out;
  }
}

// Rows that are not whole 16-byte vectors (an odd number of columns, a misaligned view) would
// leave the kernel above one element per load. Chapter 3's v3 keeps its vectors there: they run on
// across rows, each element reads its own bias, and the column is kept up to date by addition (no
// division per element), on a grid sized to the GPU. Measured on an H100 at 2^28 float32 elements
// in rows of 1,023: 761 us for v3 against 1,269 for v4 (docs/perf/h100/chapter3_layouts.md).
template <typename scalar_t, typename opmath_t, int kVec>
__global__ void fused_bias_relu_flat_kernel(const scalar_t* __restrict__ x,
                                            const scalar_t* __restrict__ bias,
                                            scalar_t* __restrict__ y, int64_t numel, int64_t cols,
                                            opmath_t scale) {
  using Vec = AlignedVector<scalar_t, kVec>;
  const int64_t num_vecs = numel / kVec;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t col_step = (stride * kVec) % cols;
  int64_t col = (first * kVec) % cols;
  auto bias_relu = [&](scalar_t v, int64_t c) {
    const opmath_t r = static_cast<opmath_t>(v) * scale + static_cast<opmath_t>(bias[c]);
    return static_cast<scalar_t>(r < opmath_t(0) ? opmath_t(0) : r);
  };
  for (int64_t v = first; v < num_vecs; v += stride) {
    const Vec in = reinterpret_cast<const Vec*>(x)[v];
    Vec out;
    int64_t c = col;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      out.val[k] = bias_relu(in.val[k], c);
      c = (c + 1 == cols) ? 0 : c + 1;
    }
    reinterpret_cast<Vec*>(y)[v] = out;
    col += col_step;
    col = col >= cols ? col - cols : col;
  }
  const int64_t tail = num_vecs * kVec + first;
  if (tail < numel) y[tail] = bias_relu(x[tail], tail % cols);
}

// Backward, one launch. A block is 32 column threads x 8 row lanes; thread (tx, ty) owns kVec
// neighbouring columns and walks rows ty, ty + 8 * splits, ... of its block's row split, so grad_y
// and y are read once, grad_x written once, and the column sums stay in registers. Each block
// then writes one partial sum per column, and the last block of a column strip to finish adds the
// strip's partials in split order: deterministic, whichever block comes last.
constexpr int kRowLanes = kThreads / kColumnThreads;
// Each split writes and re-reads a partial per column: with 16 rows a thread, that traffic stays
// near 0.5% of the three tensors' (4 + 4 bytes against 16 x 12 per column and lane, in float32).
constexpr int kRowsPerThread = 16;
// Rows whose loads a thread issues before it uses the first (grad_y and y for each).
constexpr int kUnroll = 2;

template <typename scalar_t, typename acc_t, int kVec>
__global__ void fused_bias_relu_backward_kernel(const scalar_t* __restrict__ grad_y,
                                                const scalar_t* __restrict__ y,
                                                scalar_t* __restrict__ grad_x,
                                                acc_t* __restrict__ partials,
                                                unsigned int* __restrict__ splits_done,
                                                scalar_t* __restrict__ grad_bias, int64_t rows,
                                                int64_t cols, acc_t scale) {
  using Vec = AlignedVector<scalar_t, kVec>;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x) * kVec;
  acc_t sums[kVec] = {};
  if (col0 < cols) {  // the host picks kVec dividing cols: a thread's columns are all in range
    const int64_t row_stride = static_cast<int64_t>(gridDim.y) * kRowLanes;
    for (int64_t row = static_cast<int64_t>(blockIdx.y) * kRowLanes + threadIdx.y; row < rows;
         row += row_stride * kUnroll) {
      // kUnroll rows' loads (grad_y and y for each) in flight before the first is used.
      Vec g[kUnroll], out[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t r = row + u * row_stride;
        if (r < rows) {
          g[u] = *reinterpret_cast<const Vec*>(grad_y + r * cols + col0);
          out[u] = *reinterpret_cast<const Vec*>(y + r * cols + col0);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t r = row + u * row_stride;
        if (r < rows) {
          Vec gx;
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            // Zero where y <= 0, not "keep where y > 0": a NaN output passes its gradient on.
            const acc_t active_grad = static_cast<acc_t>(out[u].val[k]) <= acc_t(0)
                                          ? acc_t(0)
                                          : static_cast<acc_t>(g[u].val[k]);
            sums[k] += active_grad;
            gx.val[k] = static_cast<scalar_t>(active_grad * scale);
          }
          *reinterpret_cast<Vec*>(grad_x + r * cols + col0) = gx;
        }
      }
    }
  }
  // Add the 8 row lanes' sums in a fixed order: one partial per (row split, column).
  __shared__ acc_t lane_sums[kRowLanes][kVec][kColumnThreads];
#pragma unroll
  for (int k = 0; k < kVec; ++k) lane_sums[threadIdx.y][k][threadIdx.x] = sums[k];
  __syncthreads();
  if (threadIdx.y == 0 && col0 < cols) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      acc_t v = lane_sums[0][k][threadIdx.x];
      for (int lane = 1; lane < kRowLanes; ++lane) v += lane_sums[lane][k][threadIdx.x];
      partials[blockIdx.y * cols + col0 + k] = v;
    }
    __threadfence();  // the partials are visible to every block before the count says so
  }
  __shared__ bool is_last_split;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    is_last_split = atomicAdd(&splits_done[blockIdx.x], 1u) == gridDim.y - 1;
  }
  __syncthreads();
  if (!is_last_split) return;
  __threadfence();  // and on this side: no read of a partial moves before the count was seen
  // The strip's last block: lane ty adds splits ty, ty + 8, ... in order, then lane 0 the 8 lanes'
  // totals in order. __ldcg reads from L2, never a stale line of this SM's L1.
  acc_t totals[kVec] = {};
  if (col0 < cols) {
    for (int64_t split = threadIdx.y; split < gridDim.y; split += kRowLanes) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) totals[k] += __ldcg(&partials[split * cols + col0 + k]);
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) lane_sums[threadIdx.y][k][threadIdx.x] = totals[k];
  __syncthreads();
  if (threadIdx.y == 0 && col0 < cols) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      acc_t v = lane_sums[0][k][threadIdx.x];
      for (int lane = 1; lane < kRowLanes; ++lane) v += lane_sums[lane][k][threadIdx.x];
      grad_bias[col0 + k] = static_cast<scalar_t>(v);
    }
  }
}

at::Tensor fused_bias_relu_cuda(const at::Tensor& x_in, const at::Tensor& bias_in, double scale) {
  check_bias_op(x_in, bias_in, "fused_bias_relu");
  const c10::cuda::CUDAGuard guard(x_in.device());
  // Any strides in, rows of contiguous memory for the kernel: a no-op for a contiguous tensor,
  // one copy for a view (checks.h says why).
  const at::Tensor x = x_in.contiguous(), bias = bias_in.contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options());
  const int64_t numel = x.numel(), cols = x.size(-1);
  if (numel == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        constexpr int kVec = 16 / sizeof(scalar_t);
        if (vector_width<scalar_t>({x.const_data_ptr(), bias.const_data_ptr(), y.const_data_ptr()},
                                   cols) == kVec) {
          auto kernel = fused_bias_relu_kernel<scalar_t, opmath_t, kVec>;
          const int64_t rows = numel / cols, vec_cols = cols / kVec;
          // Rows narrower than 32 vectors get narrower, taller blocks: no thread idles.
          int column_threads = 1;
          while (column_threads < kColumnThreads && column_threads < vec_cols) column_threads *= 2;
          const dim3 block(column_threads, kThreads / column_threads);
          const int64_t column_blocks = ceil_div(vec_cols, column_threads);
          TORCH_CHECK(column_blocks <= std::numeric_limits<int32_t>::max(),
                      "fused_bias_relu: x.size(-1) is too large (", cols, ")");
          // A block per tile, not a grid sized to the GPU: chapter 3 measured 100% of copy_
          // against 93-95% for the same kernel on the smaller grid.
          const int64_t row_blocks = std::min<int64_t>(ceil_div(rows, block.y), 65535);
          kernel<<<dim3(column_blocks, row_blocks), block, 0, stream>>>(
              x.const_data_ptr<scalar_t>(), bias.const_data_ptr<scalar_t>(),
              y.mutable_data_ptr<scalar_t>(), rows, vec_cols, static_cast<opmath_t>(scale));
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        }
        with_vector_width<scalar_t>({x.const_data_ptr(), y.const_data_ptr()}, 0, [&](auto width) {
          constexpr int kFlatVec = decltype(width)::value;
          auto kernel = fused_bias_relu_flat_kernel<scalar_t, opmath_t, kFlatVec>;
          const int64_t blocks = std::clamp<int64_t>(ceil_div(numel / kFlatVec, kThreads), 1,
                                                     blocks_to_fill_gpu(kernel, kThreads));
          kernel<<<blocks, kThreads, 0, stream>>>(
              x.const_data_ptr<scalar_t>(), bias.const_data_ptr<scalar_t>(),
              y.mutable_data_ptr<scalar_t>(), numel, cols, static_cast<opmath_t>(scale));
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
      });
  return y;
}

std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward_cuda(const at::Tensor& grad_y_in,
                                                                 const at::Tensor& y_in,
                                                                 double scale) {
  const char* op = "fused_bias_relu_backward";
  check_floating(y_in, op, "y");
  check_like(y_in, grad_y_in, op, "y", "grad_y");
  check_same_shape(y_in, grad_y_in, op, "y", "grad_y");
  TORCH_CHECK(y_in.dim() >= 1, op, ": y must have at least 1 dimension, got a 0-dim tensor");
  const c10::cuda::CUDAGuard guard(y_in.device());
  // Autograd often hands over an expanded or transposed gradient: copied here, once.
  const at::Tensor y = y_in.contiguous(), grad_y = grad_y_in.contiguous();
  const int64_t cols = y.size(-1);
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  at::Tensor grad_x = at::empty(y.sizes(), y.options());
  // No rows: the bias gradient is all zeros. Otherwise the kernel's last blocks write each element.
  if (rows == 0 || cols == 0) return {grad_x, at::zeros({cols}, y.options())};
  at::Tensor grad_bias = at::empty({cols}, y.options());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, y.scalar_type(), "fused_bias_relu_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        with_vector_width<scalar_t>(
            {grad_y.const_data_ptr(), y.const_data_ptr(), grad_x.const_data_ptr()}, cols,
            [&](auto width) {
              constexpr int kVec = decltype(width)::value;
              auto kernel = fused_bias_relu_backward_kernel<scalar_t, acc_t, kVec>;
              const int64_t column_blocks = ceil_div(cols, kColumnThreads * kVec);
              TORCH_CHECK(column_blocks <= std::numeric_limits<int32_t>::max(), op,
                          ": y.size(-1) is too large (", cols, ")");
              // As many row splits as give each thread kRowsPerThread rows, up to grid y's limit.
              const int64_t splits =
                  std::clamp<int64_t>(ceil_div(rows, kRowLanes * kRowsPerThread), 1, 65535);
              // One allocation: the partials, then a counter per column strip (zeroed on the
              // stream, as reduce_sum's).
              const int64_t partial_bytes = splits * cols * static_cast<int64_t>(sizeof(acc_t));
              at::Tensor workspace = at::empty(
                  {partial_bytes + column_blocks * static_cast<int64_t>(sizeof(unsigned int))},
                  y.options().dtype(at::kByte));
              uint8_t* base = workspace.mutable_data_ptr<uint8_t>();
              auto* splits_done = reinterpret_cast<unsigned int*>(base + partial_bytes);
              C10_CUDA_CHECK(
                  cudaMemsetAsync(splits_done, 0, column_blocks * sizeof(unsigned int), stream));
              kernel<<<dim3(column_blocks, splits), dim3(kColumnThreads, kRowLanes), 0, stream>>>(
                  grad_y.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
                  grad_x.mutable_data_ptr<scalar_t>(), reinterpret_cast<acc_t*>(base), splits_done,
                  grad_bias.mutable_data_ptr<scalar_t>(), rows, cols, static_cast<acc_t>(scale));
              C10_CUDA_KERNEL_LAUNCH_CHECK();
            });
      });
  return {grad_x, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) {
  m.impl("fused_bias_relu", &fused_bias_relu_cuda);
  m.impl("fused_bias_relu_backward", &fused_bias_relu_backward_cuda);
}

}  // namespace custom_ops::cuda
