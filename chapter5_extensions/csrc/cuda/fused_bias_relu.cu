// fused_bias_relu.cu: y = relu(x * scale + bias) and its backward for CUDA tensors: chapter 3's
// vectorized forward (v3) and chapter 4's one-pass backward with a deterministic bias gradient.
// CPU: csrc/fused_bias_relu.cpp.

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "../checks.h"
#include "launch_utils.cuh"

namespace custom_ops::cuda {
namespace {

// Each thread handles kVec neighbouring elements per step (one 16-byte load and store) and keeps
// the column of its first element as it strides, instead of a 64-bit modulo per element.
template <typename scalar_t, typename opmath_t, int kVec>
__global__ void fused_bias_relu_kernel(const scalar_t* __restrict__ x,
                                       const scalar_t* __restrict__ bias, scalar_t* __restrict__ y,
                                       int64_t numel, int64_t cols, opmath_t scale) {
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

// Backward: a block is 32 column threads x 8 row lanes; thread (tx, ty) owns kVec neighbouring
// columns and walks rows ty, ty + 8, ... of its block's row split, so grad_y and y are read once,
// grad_x written once, and the column sums stay in registers until the end.
constexpr int kColumnThreads = 32;
constexpr int kRowLanes = 8;

template <typename scalar_t, typename acc_t, int kVec>
__global__ void fused_bias_relu_backward_kernel(const scalar_t* __restrict__ grad_y,
                                                const scalar_t* __restrict__ y,
                                                scalar_t* __restrict__ grad_x,
                                                acc_t* __restrict__ partials, int64_t rows,
                                                int64_t cols, acc_t scale) {
  using Vec = AlignedVector<scalar_t, kVec>;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x) * kVec;
  acc_t sums[kVec] = {};
  if (col0 < cols) {  // the host picks kVec dividing cols: a thread's columns are all in range
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kRowLanes + threadIdx.y; r < rows;
         r += static_cast<int64_t>(gridDim.y) * kRowLanes) {
      const int64_t i = r * cols + col0;
      const Vec g = *reinterpret_cast<const Vec*>(grad_y + i);
      const Vec out = *reinterpret_cast<const Vec*>(y + i);
      Vec gx;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        // Zero where y <= 0, not "keep where y > 0": a NaN output passes its gradient on.
        const acc_t active_grad =
            static_cast<acc_t>(out.val[k]) <= acc_t(0) ? acc_t(0) : static_cast<acc_t>(g.val[k]);
        sums[k] += active_grad;
        gx.val[k] = static_cast<scalar_t>(active_grad * scale);
      }
      *reinterpret_cast<Vec*>(grad_x + i) = gx;
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
  }
}

// grad_bias[c] = the row splits' partials for column c, added in split order (deterministic).
template <typename scalar_t, typename acc_t>
__global__ void sum_partials_kernel(const acc_t* __restrict__ partials, int64_t splits,
                                    int64_t cols, scalar_t* __restrict__ grad_bias) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  acc_t v = 0;
  for (int64_t s = 0; s < splits; ++s) v += partials[s * cols + col];
  grad_bias[col] = static_cast<scalar_t>(v);
}

at::Tensor fused_bias_relu_cuda(const at::Tensor& x, const at::Tensor& bias, double scale) {
  check_bias_op(x, bias, "fused_bias_relu");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  const int64_t numel = x.numel(), cols = x.size(-1);
  if (numel == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        with_vector_width<scalar_t>({x.const_data_ptr(), y.const_data_ptr()}, 0, [&](auto width) {
          constexpr int kVec = decltype(width)::value;
          auto kernel = fused_bias_relu_kernel<scalar_t, opmath_t, kVec>;
          const int64_t blocks = std::min(std::max<int64_t>(1, ceil_div(numel / kVec, kThreads)),
                                          blocks_to_fill_gpu(kernel, kThreads));
          kernel<<<blocks, kThreads, 0, stream>>>(
              x.const_data_ptr<scalar_t>(), bias.const_data_ptr<scalar_t>(),
              y.mutable_data_ptr<scalar_t>(), numel, cols, static_cast<opmath_t>(scale));
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
      });
  return y;
}

std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward_cuda(const at::Tensor& grad_y,
                                                                 const at::Tensor& y,
                                                                 double scale) {
  const char* op = "fused_bias_relu_backward";
  check_floating(y, op, "y");
  check_like(y, grad_y, op, "y", "grad_y");
  check_same_shape(y, grad_y, op, "y", "grad_y");
  TORCH_CHECK(y.dim() >= 1, op, ": y must have at least 1 dimension, got a 0-dim tensor");
  check_contiguous(y, op, "y");
  check_contiguous(grad_y, op, "grad_y");
  const c10::cuda::CUDAGuard guard(y.device());
  const int64_t cols = y.size(-1);
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  at::Tensor grad_x = at::empty_like(y);
  at::Tensor grad_bias = at::zeros({cols}, y.options());
  if (rows == 0 || cols == 0) return {grad_x, grad_bias};
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
              const int64_t fill = blocks_to_fill_gpu(kernel, kColumnThreads * kRowLanes);
              // Split the rows until the grid fills the GPU; each split costs a partial per column.
              const int64_t splits = std::clamp<int64_t>(
                  fill / column_blocks, 1, std::min<int64_t>(ceil_div(rows, kRowLanes), 1024));
              at::Tensor partials = at::empty(
                  {splits, cols}, y.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
              kernel<<<dim3(column_blocks, splits), dim3(kColumnThreads, kRowLanes), 0, stream>>>(
                  grad_y.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
                  grad_x.mutable_data_ptr<scalar_t>(), partials.mutable_data_ptr<acc_t>(), rows,
                  cols, static_cast<acc_t>(scale));
              C10_CUDA_KERNEL_LAUNCH_CHECK();
              sum_partials_kernel<scalar_t, acc_t>
                  <<<ceil_div(cols, kThreads), kThreads, 0, stream>>>(
                      partials.const_data_ptr<acc_t>(), splits, cols,
                      grad_bias.mutable_data_ptr<scalar_t>());
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
