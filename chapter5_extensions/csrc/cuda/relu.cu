// relu.cu: custom_ops::relu and its backward for CUDA tensors, one kernel for both: 16-byte
// vectors, a block per tile (chapter 3's v4 without the bias). CPU: csrc/relu.cpp.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

#include "../checks.h"
#include "launch_utils.cuh"

namespace custom_ops::cuda {
namespace {

// out = relu(a) (kBackward false) or, for the backward, out = (b <= 0 ? 0 : a) with a = grad_y and
// b = y: zero where y <= 0, as PyTorch's threshold_backward, so NaN passes in both directions.
// A thread per 16-byte vector, a block per kThreads vectors: the loop runs once for any tensor a
// grid can cover. The numel % kVec elements that do not fill a vector go to the first threads.
template <typename scalar_t, int kVec, bool kBackward>
__global__ void relu_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                            scalar_t* __restrict__ out, int64_t numel) {
  using Vec = AlignedVector<scalar_t, kVec>;
  auto apply = [](scalar_t av, scalar_t bv) {
    if constexpr (kBackward) return bv <= scalar_t(0) ? scalar_t(0) : av;
    return av <= scalar_t(0) ? scalar_t(0) : av;  // NaN <= 0 is false: NaN stays NaN
  };
  const int64_t num_vecs = numel / kVec;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = first; v < num_vecs; v += stride) {
    const Vec in_a = reinterpret_cast<const Vec*>(a)[v];
    Vec in_b;
    if constexpr (kBackward) in_b = reinterpret_cast<const Vec*>(b)[v];
    Vec result;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      result.val[k] = apply(in_a.val[k], kBackward ? in_b.val[k] : scalar_t(0));
    }
    reinterpret_cast<Vec*>(out)[v] = result;
  }
  const int64_t tail = num_vecs * kVec + first;
  if (tail < numel) out[tail] = apply(a[tail], kBackward ? b[tail] : scalar_t(0));
}

// One launch of relu_kernel over `numel` elements, the vector width from the pointers' alignment.
template <typename scalar_t, bool kBackward>
void launch_relu(const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t numel) {
  with_vector_width<scalar_t>({a, b, out}, 0, [&](auto width) {
    constexpr int kVec = decltype(width)::value;
    auto kernel = relu_kernel<scalar_t, kVec, kBackward>;
    // A block per kThreads vectors (chapter 3's v4), not a grid sized to the GPU.
    const int64_t blocks = std::clamp<int64_t>(ceil_div(numel / kVec, kThreads), 1,
                                               std::numeric_limits<int32_t>::max());
    kernel<<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(a, b, out, numel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

at::Tensor relu_cuda(const at::Tensor& x_in) {
  check_floating(x_in, "relu", "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();  // a view is copied once (checks.h says why)
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu", [&] {
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    launch_relu<scalar_t, false>(in, in, y.mutable_data_ptr<scalar_t>(), x.numel());
  });
  return y;
}

at::Tensor relu_backward_cuda(const at::Tensor& grad_y_in, const at::Tensor& y_in) {
  const char* op = "relu_backward";
  check_floating(y_in, op, "y");
  check_like(y_in, grad_y_in, op, "y", "grad_y");
  check_same_shape(y_in, grad_y_in, op, "y", "grad_y");
  const c10::cuda::CUDAGuard guard(y_in.device());
  const at::Tensor y = y_in.contiguous(), grad_y = grad_y_in.contiguous();
  at::Tensor grad_x = at::empty(y.sizes(), y.options());
  if (y.numel() == 0) return grad_x;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "relu_backward", [&] {
    launch_relu<scalar_t, true>(grad_y.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
                                grad_x.mutable_data_ptr<scalar_t>(), y.numel());
  });
  return grad_x;
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) {
  m.impl("relu", &relu_cuda);
  m.impl("relu_backward", &relu_backward_cuda);
}

}  // namespace custom_ops::cuda
