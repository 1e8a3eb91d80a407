// fused_bias_relu.cu: forward and backward kernels for chapter 4's two ops (lesson: "The
// kernels"):
//   relu_forward       y = relu(x) and the mask !(y <= 0) (bool) in one pass
//   relu_backward      grad_x = mask ? grad_y : 0
//   fused_bias_relu    y = relu(x * scale + bias): chapter 3's v3, vectorized
//   ..._backward       one pass over grad_y and the saved y that writes grad_x = grad_y * scale *
//                      (y > 0) and, per block, partial column sums of grad_y * (y > 0); a second
//                      kernel adds the partials in a fixed order into grad_bias (deterministic)
// Every launcher: checks, device guard, current stream, C10_CUDA_KERNEL_LAUNCH_CHECK, 64-bit
// indices. Built by load_chapter4.py.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "checks.h"
#include "cuda_ops.h"
#include "launch_utils.cuh"

namespace {

constexpr int kThreads = 256;

// ---- relu --------------------------------------------------------------------------------------

template <typename scalar_t>
__global__ void relu_forward_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
                                    bool* __restrict__ mask, int64_t numel) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    const scalar_t v = x[i];
    // Written as !(v <= 0) so that NaN counts as active: relu keeps NaN, and PyTorch's backward
    // passes the gradient through it (it zeroes only where y <= 0).
    const bool active = !(v <= scalar_t(0));
    y[i] = active ? v : scalar_t(0);
    mask[i] = active;
  }
}

template <typename scalar_t>
__global__ void relu_backward_kernel(const scalar_t* __restrict__ grad_y,
                                     const bool* __restrict__ mask, scalar_t* __restrict__ grad_x,
                                     int64_t numel) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += stride) {
    grad_x[i] = mask[i] ? grad_y[i] : scalar_t(0);
  }
}

// ---- fused_bias_relu forward (chapter 3's v3) --------------------------------------------------

template <typename scalar_t, typename opmath_t, int kVec>
__global__ void fused_bias_relu_forward_kernel(const scalar_t* __restrict__ x,
                                               const scalar_t* __restrict__ bias,
                                               scalar_t* __restrict__ y, int64_t numel,
                                               int64_t cols, opmath_t scale) {
  using Vec = course::AlignedVector<scalar_t, kVec>;
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

// ---- fused_bias_relu backward ------------------------------------------------------------------

// A block is 32 column threads x 8 row lanes. Thread (tx, ty) owns kVec neighbouring columns and
// walks the rows ty, ty + 8, ... of its block's row split: a warp reads 32 * kVec neighbouring
// elements of one row (coalesced, 16-byte loads). grad_y and y are read once; grad_x is written
// once; the column sums stay in registers until the end.
constexpr int kColumnThreads = 32;
constexpr int kRowLanes = 8;

template <typename scalar_t, typename acc_t, int kVec>
__global__ void fused_bias_relu_backward_kernel(const scalar_t* __restrict__ grad_y,
                                                const scalar_t* __restrict__ y,
                                                scalar_t* __restrict__ grad_x,  // null: skip
                                                acc_t* __restrict__ partials,   // null: skip
                                                int64_t rows, int64_t cols, acc_t scale) {
  using Vec = course::AlignedVector<scalar_t, kVec>;
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
        // !(y <= 0), not y > 0: a NaN output passes its gradient on, as in PyTorch.
        const acc_t active_grad =
            static_cast<acc_t>(out.val[k]) <= acc_t(0) ? acc_t(0) : static_cast<acc_t>(g.val[k]);
        sums[k] += active_grad;
        gx.val[k] = static_cast<scalar_t>(active_grad * scale);
      }
      if (grad_x != nullptr) *reinterpret_cast<Vec*>(grad_x + i) = gx;
    }
  }
  if (partials == nullptr) return;  // a kernel argument: the same for every thread of the block
  // Add the 8 row lanes' sums in a fixed order, one partial per (row split, column).
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

// grad_bias[c] = the sum of the row splits' partials for column c, in split order.
template <typename scalar_t, typename acc_t>
__global__ void sum_partials_kernel(const acc_t* __restrict__ partials, int64_t splits,
                                    int64_t cols, scalar_t* __restrict__ grad_bias) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  acc_t v = 0;
  for (int64_t s = 0; s < splits; ++s) v += partials[s * cols + col];
  grad_bias[col] = static_cast<scalar_t>(v);
}

}  // namespace

namespace cuda_ops {

std::tuple<at::Tensor, at::Tensor> relu_forward(const at::Tensor& x_in) {
  course::check_cuda(x_in, "relu_forward", "x");
  const c10::cuda::CUDAGuard device_guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = at::empty_like(x);
  at::Tensor mask = at::empty_like(x, x.options().dtype(at::kBool));
  if (x.numel() == 0) return {y, mask};
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu_forward", [&] {
    auto kernel = relu_forward_kernel<scalar_t>;
    const int64_t blocks = std::min(course::ceil_div(x.numel(), kThreads),
                                    course::blocks_to_fill_gpu(kernel, kThreads));
    kernel<<<blocks, kThreads, 0, stream>>>(x.const_data_ptr<scalar_t>(),
                                            y.mutable_data_ptr<scalar_t>(),
                                            mask.mutable_data_ptr<bool>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {y, mask};
}

at::Tensor relu_backward(const at::Tensor& grad_y_in, const at::Tensor& mask_in) {
  course::check_cuda(grad_y_in, "relu_backward", "grad_y");
  const c10::cuda::CUDAGuard device_guard(grad_y_in.device());
  const at::Tensor grad_y = grad_y_in.contiguous();
  const at::Tensor mask = mask_in.contiguous();
  at::Tensor grad_x = at::empty_like(grad_y);
  if (grad_y.numel() == 0) return grad_x;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad_y.scalar_type(), "relu_backward", [&] {
        auto kernel = relu_backward_kernel<scalar_t>;
        const int64_t blocks = std::min(course::ceil_div(grad_y.numel(), kThreads),
                                        course::blocks_to_fill_gpu(kernel, kThreads));
        kernel<<<blocks, kThreads, 0, stream>>>(
            grad_y.const_data_ptr<scalar_t>(), mask.const_data_ptr<bool>(),
            grad_x.mutable_data_ptr<scalar_t>(), grad_y.numel());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return grad_x;
}

at::Tensor fused_bias_relu_forward(const at::Tensor& x_in, const at::Tensor& bias_in,
                                   double scale) {
  course::check_cuda(x_in, "fused_bias_relu_forward", "x");
  const c10::cuda::CUDAGuard device_guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  const at::Tensor bias = bias_in.contiguous();
  at::Tensor y = at::empty_like(x);
  const int64_t numel = x.numel(), cols = x.size(-1);
  if (numel == 0) return y;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_forward", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        course::with_vector_width<scalar_t>(
            {x.const_data_ptr(), y.const_data_ptr()}, /*divides=*/0, [&](auto width) {
              auto kernel =
                  fused_bias_relu_forward_kernel<scalar_t, opmath_t, decltype(width)::value>;
              const int64_t blocks = std::min(
                  std::max<int64_t>(1, course::ceil_div(numel / decltype(width)::value, kThreads)),
                  course::blocks_to_fill_gpu(kernel, kThreads));
              kernel<<<blocks, kThreads, 0, stream>>>(
                  x.const_data_ptr<scalar_t>(), bias.const_data_ptr<scalar_t>(),
                  y.mutable_data_ptr<scalar_t>(), numel, cols, static_cast<opmath_t>(scale));
              C10_CUDA_KERNEL_LAUNCH_CHECK();
            });
      });
  return y;
}

std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward(const at::Tensor& grad_y_in,
                                                            const at::Tensor& y_in, double scale,
                                                            bool need_grad_x, bool need_grad_bias) {
  const char* op = "fused_bias_relu_backward";
  course::check_cuda(grad_y_in, op, "grad_y");
  const c10::cuda::CUDAGuard device_guard(grad_y_in.device());
  // grad_y is often not contiguous: the gradient of y.sum() is one value expanded (stride 0).
  const at::Tensor grad_y = grad_y_in.contiguous();
  const at::Tensor y = y_in.contiguous();
  const int64_t cols = y.size(-1);
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  at::Tensor grad_x = need_grad_x ? at::empty_like(y) : at::Tensor();
  at::Tensor grad_bias = need_grad_bias ? at::zeros({cols}, y.options()) : at::Tensor();
  if (rows == 0 || cols == 0 || !(need_grad_x || need_grad_bias)) return {grad_x, grad_bias};
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, y.scalar_type(), "fused_bias_relu_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        scalar_t* grad_x_ptr = need_grad_x ? grad_x.mutable_data_ptr<scalar_t>() : nullptr;
        course::with_vector_width<scalar_t>(
            {grad_y.const_data_ptr(), y.const_data_ptr(), grad_x_ptr}, cols, [&](auto width) {
              auto kernel =
                  fused_bias_relu_backward_kernel<scalar_t, acc_t, decltype(width)::value>;
              const int64_t column_blocks =
                  course::ceil_div(cols, kColumnThreads * decltype(width)::value);
              const int64_t fill = course::blocks_to_fill_gpu(kernel, kColumnThreads * kRowLanes);
              // Split the rows until the grid fills the GPU; each split costs a partial per column.
              const int64_t splits =
                  std::clamp<int64_t>(fill / column_blocks, 1,
                                      std::min<int64_t>(course::ceil_div(rows, kRowLanes), 1024));
              at::Tensor partials;
              if (need_grad_bias) {
                partials = at::empty({splits, cols},
                                     y.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
              }
              kernel<<<dim3(column_blocks, splits), dim3(kColumnThreads, kRowLanes), 0, stream>>>(
                  grad_y.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(), grad_x_ptr,
                  need_grad_bias ? partials.mutable_data_ptr<acc_t>() : nullptr, rows, cols,
                  static_cast<acc_t>(scale));
              C10_CUDA_KERNEL_LAUNCH_CHECK();
              if (need_grad_bias) {
                sum_partials_kernel<scalar_t, acc_t>
                    <<<course::ceil_div(cols, kThreads), kThreads, 0, stream>>>(
                        partials.const_data_ptr<acc_t>(), splits, cols,
                        grad_bias.mutable_data_ptr<scalar_t>());
                C10_CUDA_KERNEL_LAUNCH_CHECK();
              }
            });
      });
  return {grad_x, grad_bias};
}

}  // namespace cuda_ops
