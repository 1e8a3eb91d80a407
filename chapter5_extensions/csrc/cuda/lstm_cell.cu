// lstm_cell.cu: the LSTM cell's pointwise work as one kernel each way, and custom_ops::lstm_cell's
// CUDA registration, which calls lstm_cell.cpp's host function with these two kernels: it runs
// the matrix products (cuBLAS, through ATen), then the kernel. One thread per (batch row b, hidden
// unit j); a row of the gates holds i, f, g, o side by side, (B, 4H).

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include "../lstm_cell.h"
#include "launch_utils.cuh"

namespace custom_ops::cuda {
namespace {

template <typename acc_t>
__device__ __forceinline__ acc_t sigmoid(acc_t v) {
  return acc_t(1) / (acc_t(1) + exp(-v));
}

// z = pre + b_ih + b_hh; i = s(z_i), f = s(z_f), g = tanh(z_g), o = s(z_o); c' = f c + i g;
// h' = o tanh(c'). Adding the biases here spares the products a broadcast copy of them, and the
// step a kernel that adds the two.
template <typename scalar_t, typename acc_t>
__global__ void lstm_forward_kernel(const scalar_t* __restrict__ pre,
                                    const scalar_t* __restrict__ b_ih,
                                    const scalar_t* __restrict__ b_hh,
                                    const scalar_t* __restrict__ c, scalar_t* __restrict__ h_next,
                                    scalar_t* __restrict__ c_next, scalar_t* __restrict__ gates,
                                    scalar_t* __restrict__ tanh_c, int64_t batch, int64_t hidden) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < batch * hidden; idx += stride) {
    const int64_t b = idx / hidden, j = idx % hidden, row = b * 4 * hidden;
    acc_t z[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t col = k * hidden + j;
      z[k] = static_cast<acc_t>(pre[row + col]) + static_cast<acc_t>(b_ih[col]) +
             static_cast<acc_t>(b_hh[col]);
    }
    const acc_t i = sigmoid(z[0]), f = sigmoid(z[1]), g = tanh(z[2]), o = sigmoid(z[3]);
    const acc_t cn = f * static_cast<acc_t>(c[idx]) + i * g;
    const acc_t tc = tanh(cn);
    gates[row + j] = static_cast<scalar_t>(i);
    gates[row + hidden + j] = static_cast<scalar_t>(f);
    gates[row + 2 * hidden + j] = static_cast<scalar_t>(g);
    gates[row + 3 * hidden + j] = static_cast<scalar_t>(o);
    c_next[idx] = static_cast<scalar_t>(cn);
    tanh_c[idx] = static_cast<scalar_t>(tc);
    h_next[idx] = static_cast<scalar_t>(o * tc);
  }
}

// With dc the whole gradient reaching c': dc = grad_c + grad_h o (1 - tanh(c')^2), then
// dz_i = dc g i(1-i), dz_f = dc c f(1-f), dz_g = dc i (1-g^2), dz_o = grad_h tanh(c') o(1-o),
// and the gradient of c is dc f (chapter 4's derivation). grad_h and grad_c are read through
// their strides (row, column); everything else is contiguous.
template <typename scalar_t, typename acc_t>
__global__ void lstm_backward_kernel(
    const scalar_t* __restrict__ grad_h, int64_t grad_h_row, int64_t grad_h_col,
    const scalar_t* __restrict__ grad_c, int64_t grad_c_row, int64_t grad_c_col,
    const scalar_t* __restrict__ c, const scalar_t* __restrict__ gates,
    const scalar_t* __restrict__ tanh_c, scalar_t* __restrict__ grad_pre,
    scalar_t* __restrict__ grad_c_prev, int64_t batch, int64_t hidden) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < batch * hidden; idx += stride) {
    const int64_t b = idx / hidden, j = idx % hidden, row = b * 4 * hidden;
    const acc_t i = gates[row + j], f = gates[row + hidden + j];
    const acc_t g = gates[row + 2 * hidden + j], o = gates[row + 3 * hidden + j];
    const acc_t tc = tanh_c[idx];
    const acc_t dh = grad_h[b * grad_h_row + j * grad_h_col];
    const acc_t dc =
        static_cast<acc_t>(grad_c[b * grad_c_row + j * grad_c_col]) + dh * o * (acc_t(1) - tc * tc);
    grad_pre[row + j] = static_cast<scalar_t>(dc * g * i * (acc_t(1) - i));
    grad_pre[row + hidden + j] =
        static_cast<scalar_t>(dc * static_cast<acc_t>(c[idx]) * f * (acc_t(1) - f));
    grad_pre[row + 2 * hidden + j] = static_cast<scalar_t>(dc * i * (acc_t(1) - g * g));
    grad_pre[row + 3 * hidden + j] = static_cast<scalar_t>(dh * tc * o * (acc_t(1) - o));
    grad_c_prev[idx] = static_cast<scalar_t>(dc * f);
  }
}

// lstm_cell.cpp has checked shapes, dtypes and devices, and made contiguous everything passed here
// but the gradients, which the backward kernel reads through their strides.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstm_pointwise_forward(
    const at::Tensor& pre, const at::Tensor& b_ih, const at::Tensor& b_hh, const at::Tensor& c) {
  check_cuda(c, "lstm_cell", "c");
  const c10::cuda::CUDAGuard guard(c.device());
  const int64_t batch = c.size(0), hidden = c.size(1);
  at::Tensor h_next = at::empty_like(c), c_next = at::empty_like(c), tanh_c = at::empty_like(c);
  at::Tensor gates = at::empty_like(pre);
  if (batch * hidden == 0) return {h_next, c_next, gates, tanh_c};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, c.scalar_type(), "lstm_cell", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    auto kernel = lstm_forward_kernel<scalar_t, acc_t>;
    kernel<<<grid_for(kernel, batch * hidden), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        pre.const_data_ptr<scalar_t>(), b_ih.const_data_ptr<scalar_t>(),
        b_hh.const_data_ptr<scalar_t>(), c.const_data_ptr<scalar_t>(),
        h_next.mutable_data_ptr<scalar_t>(), c_next.mutable_data_ptr<scalar_t>(),
        gates.mutable_data_ptr<scalar_t>(), tanh_c.mutable_data_ptr<scalar_t>(), batch, hidden);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {h_next, c_next, gates, tanh_c};
}

std::tuple<at::Tensor, at::Tensor> lstm_pointwise_backward(const at::Tensor& grad_h,
                                                           const at::Tensor& grad_c,
                                                           const at::Tensor& c,
                                                           const at::Tensor& gates,
                                                           const at::Tensor& tanh_c) {
  check_cuda(c, "lstm_cell_backward", "c");
  const c10::cuda::CUDAGuard guard(c.device());
  const int64_t batch = c.size(0), hidden = c.size(1);
  at::Tensor grad_pre = at::empty_like(gates), grad_c_prev = at::empty_like(c);
  if (batch * hidden == 0) return {grad_pre, grad_c_prev};
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, c.scalar_type(), "lstm_cell_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        auto kernel = lstm_backward_kernel<scalar_t, acc_t>;
        kernel<<<grid_for(kernel, batch * hidden), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            grad_h.const_data_ptr<scalar_t>(), grad_h.stride(0), grad_h.stride(1),
            grad_c.const_data_ptr<scalar_t>(), grad_c.stride(0), grad_c.stride(1),
            c.const_data_ptr<scalar_t>(), gates.const_data_ptr<scalar_t>(),
            tanh_c.const_data_ptr<scalar_t>(), grad_pre.mutable_data_ptr<scalar_t>(),
            grad_c_prev.mutable_data_ptr<scalar_t>(), batch, hidden);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {grad_pre, grad_c_prev};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstm_cell_cuda(
    const at::Tensor& x, const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
    const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh) {
  return custom_ops::lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, &lstm_pointwise_forward);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
lstm_cell_backward_cuda(const at::Tensor& grad_h, const at::Tensor& grad_c, const at::Tensor& x,
                        const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
                        const at::Tensor& w_hh, const at::Tensor& gates, const at::Tensor& tanh_c,
                        std::array<bool, 6> output_mask) {
  return custom_ops::lstm_cell_backward(grad_h, grad_c, x, h, c, w_ih, w_hh, gates, tanh_c,
                                        output_mask, &lstm_pointwise_backward);
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) {
  m.impl("lstm_cell", &lstm_cell_cuda);
  m.impl("lstm_cell_backward", &lstm_cell_backward_cuda);
}

}  // namespace custom_ops::cuda
