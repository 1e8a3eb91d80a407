// lstm_cell.cu: the pointwise part of the LSTM cell's backward as one kernel (lesson: "The LSTM
// cell backward"). The backward's matrix products stay with cuBLAS (ATen's mm in
// lstm_cell.cpp); the pointwise part before them, four gates and the cell state, is one pass here
// instead of the dozen or so elementwise kernels autograd would launch. Built by load_chapter4.py.

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
#include <tuple>

#include "checks.h"
#include "cuda_ops.h"
#include "launch_utils.cuh"

namespace {

constexpr int kThreads = 256;

// One thread per (batch row b, hidden unit j). gates holds the activated i, f, g, o side by side
// in each row (B, 4H), as the forward returned them. With dc the total gradient reaching c':
//   dc       = grad_c + grad_h * o * (1 - tanh(c')^2)
//   d(i pre) = dc * g * i (1 - i)      d(f pre) = dc * c * f (1 - f)
//   d(g pre) = dc * i * (1 - g^2)      d(o pre) = grad_h * tanh(c') * o (1 - o)
//   grad of c = dc * f
template <typename scalar_t, typename acc_t>
__global__ void lstm_gates_backward_kernel(
    const scalar_t* __restrict__ grad_h, const scalar_t* __restrict__ grad_c,
    const scalar_t* __restrict__ c, const scalar_t* __restrict__ gates,
    const scalar_t* __restrict__ tanh_c, scalar_t* __restrict__ grad_gates,
    scalar_t* __restrict__ grad_c_prev, int64_t batch, int64_t hidden) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < batch * hidden; idx += stride) {
    const int64_t b = idx / hidden, j = idx % hidden;
    const int64_t row = b * 4 * hidden;
    const acc_t i = gates[row + j], f = gates[row + hidden + j];
    const acc_t g = gates[row + 2 * hidden + j], o = gates[row + 3 * hidden + j];
    const acc_t tc = tanh_c[idx], dh = grad_h[idx];
    const acc_t dc = static_cast<acc_t>(grad_c[idx]) + dh * o * (acc_t(1) - tc * tc);
    grad_gates[row + j] = static_cast<scalar_t>(dc * g * i * (acc_t(1) - i));
    grad_gates[row + hidden + j] =
        static_cast<scalar_t>(dc * static_cast<acc_t>(c[idx]) * f * (acc_t(1) - f));
    grad_gates[row + 2 * hidden + j] = static_cast<scalar_t>(dc * i * (acc_t(1) - g * g));
    grad_gates[row + 3 * hidden + j] = static_cast<scalar_t>(dh * tc * o * (acc_t(1) - o));
    grad_c_prev[idx] = static_cast<scalar_t>(dc * f);
  }
}

}  // namespace

namespace cuda_ops {

std::tuple<at::Tensor, at::Tensor> lstm_gates_backward(const at::Tensor& grad_h_in,
                                                       const at::Tensor& grad_c_in,
                                                       const at::Tensor& c_in,
                                                       const at::Tensor& gates_in,
                                                       const at::Tensor& tanh_c_in) {
  course::check_cuda(c_in, "lstm_cell_backward", "c");
  const c10::cuda::CUDAGuard device_guard(c_in.device());
  const at::Tensor grad_h = grad_h_in.contiguous(), grad_c = grad_c_in.contiguous();
  const at::Tensor c = c_in.contiguous(), gates = gates_in.contiguous();
  const at::Tensor tanh_c = tanh_c_in.contiguous();
  const int64_t batch = c.size(0), hidden = c.size(1);
  at::Tensor grad_gates = at::empty_like(gates);
  at::Tensor grad_c_prev = at::empty_like(c);
  if (batch * hidden == 0) return {grad_gates, grad_c_prev};
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, c.scalar_type(), "lstm_cell_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        auto kernel = lstm_gates_backward_kernel<scalar_t, acc_t>;
        const int64_t blocks = std::min(course::ceil_div(batch * hidden, kThreads),
                                        course::blocks_to_fill_gpu(kernel, kThreads));
        kernel<<<blocks, kThreads, 0, stream>>>(
            grad_h.const_data_ptr<scalar_t>(), grad_c.const_data_ptr<scalar_t>(),
            c.const_data_ptr<scalar_t>(), gates.const_data_ptr<scalar_t>(),
            tanh_c.const_data_ptr<scalar_t>(), grad_gates.mutable_data_ptr<scalar_t>(),
            grad_c_prev.mutable_data_ptr<scalar_t>(), batch, hidden);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return {grad_gates, grad_c_prev};
}

}  // namespace cuda_ops
