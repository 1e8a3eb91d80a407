// conv_rnn.cu: the convolutional RNN of csrc/conv_rnn.cpp for CUDA tensors, with the time loop
// inside the kernel. A sequence's steps depend on each other, so a Python loop pays a handful of
// kernel launches per step; here one launch runs every step. One block per sequence (batch
// row); its hidden state lives in shared memory for the whole sequence, double-buffered so that
// one barrier per step suffices.

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <limits>

#include "../checks.h"
#include "../conv_rnn.h"
#include "launch_utils.cuh"

namespace custom_ops::cuda {
namespace {

// Up to 1024 threads a block: __launch_bounds__ makes the compiler keep the registers per thread
// low enough for that (else the launch fails with "too many resources requested").
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(1024)
    conv_rnn_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ kernel,
                    const scalar_t* __restrict__ hidden, scalar_t* __restrict__ out, int64_t time,
                    int64_t features, int64_t taps) {
  extern __shared__ unsigned char shared_bytes[];
  acc_t* weights = reinterpret_cast<acc_t*>(shared_bytes);
  acc_t* prev = weights + taps;
  acc_t* next = prev + features;
  const int64_t b = blockIdx.x, radius = taps / 2;
  for (int64_t k = threadIdx.x; k < taps; k += blockDim.x) weights[k] = kernel[k];
  for (int64_t f = threadIdx.x; f < features; f += blockDim.x) prev[f] = hidden[b * features + f];
  __syncthreads();
  for (int64_t t = 0; t < time; ++t) {
    const int64_t row = (b * time + t) * features;
    for (int64_t f = threadIdx.x; f < features; f += blockDim.x) {
      acc_t v = static_cast<acc_t>(x[row + f]);
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t src = f + k - radius;
        if (src >= 0 && src < features) v += weights[k] * prev[src];
      }
      const acc_t h = tanh(v);
      next[f] = h;
      out[row + f] = static_cast<scalar_t>(h);
    }
    // Everyone has read prev and written next: next becomes prev. (The step after writes into
    // the old prev, which no thread reads any more once all have passed this barrier.)
    __syncthreads();
    acc_t* swap = prev;
    prev = next;
    next = swap;
  }
}

at::Tensor conv_rnn_cuda(const at::Tensor& x_in, const at::Tensor& kernel_in,
                         const at::Tensor& hidden_in) {
  check_conv_rnn(x_in, kernel_in, hidden_in);
  // Any strides in (checks.h): the time loop reads contiguous rows.
  const at::Tensor x = x_in.contiguous(), kernel = kernel_in.contiguous(),
                   hidden = hidden_in.contiguous();
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t batch = x.size(0), time = x.size(1), features = x.size(2), taps = kernel.size(0);
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) return out;
  TORCH_CHECK(batch <= std::numeric_limits<int>::max(), "conv_rnn: batch ", batch,
              " is more than one grid of blocks can hold (", std::numeric_limits<int>::max(), ")");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "conv_rnn", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    auto kernel_fn = conv_rnn_kernel<scalar_t, acc_t>;
    const size_t shared = (2 * features + taps) * sizeof(acc_t);
    // Above 48 KiB a kernel must opt in to more shared memory, up to the GPU's limit per block.
    const size_t limit = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin;
    TORCH_CHECK(shared <= limit, "conv_rnn: the hidden state (2 x ", features, " features) and ",
                taps, " kernel taps need ", shared, " bytes of shared memory, more than the ",
                limit, " a block can have on this GPU");
    if (shared > 48 * 1024) {
      C10_CUDA_CHECK(cudaFuncSetAttribute(kernel_fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(shared)));
    }
    // Up to 1024 threads, a multiple of the warp size, none idle when features is small.
    const int threads = static_cast<int>(std::min<int64_t>(1024, ceil_div(features, 32) * 32));
    kernel_fn<<<batch, threads, shared, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), kernel.const_data_ptr<scalar_t>(),
        hidden.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), time, features, taps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) { m.impl("conv_rnn", &conv_rnn_cuda); }

}  // namespace custom_ops::cuda
