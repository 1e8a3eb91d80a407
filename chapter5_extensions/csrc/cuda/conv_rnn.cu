// conv_rnn.cu: the convolutional RNN of csrc/conv_rnn.cpp for CUDA tensors, with the time loop
// inside the kernel, and its backward through time the same way. A sequence's steps depend on each
// other, so a Python loop pays a handful of kernel launches per step; here one launch runs every
// step. One block per sequence (batch row); its hidden state (forward) or its gradient (backward)
// lives in shared memory for the whole sequence, double-buffered so that one barrier per step
// suffices.

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

#include <limits>
#include <tuple>

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

// The backward through time (csrc/conv_rnn.cpp gives the formulas), the loop run in reverse. The
// step for h_t reads dz_{t+1} at the neighbours of s from shared memory, and h_t and grad_out_t at
// s alone from global memory; dz is double-buffered as the forward's h is. The kernel's gradient
// sums over every step: each thread keeps its own sum per tap in shared memory (a tap count known
// only at run time cannot index registers), and the block adds them in a fixed order at the end.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(1024)
    conv_rnn_backward_kernel(const scalar_t* __restrict__ grad_out,
                             const scalar_t* __restrict__ out, const scalar_t* __restrict__ kernel,
                             const scalar_t* __restrict__ hidden, scalar_t* __restrict__ grad_x,
                             scalar_t* __restrict__ grad_hidden,
                             acc_t* __restrict__ grad_kernel_partials, int64_t time,
                             int64_t features, int64_t taps) {
  extern __shared__ unsigned char shared_bytes[];
  acc_t* weights = reinterpret_cast<acc_t*>(shared_bytes);
  acc_t* later = weights + taps;  // dz_{t+1}
  acc_t* now = later + features;  // dz_t
  // Thread i's sum for tap k at grad_w[k * threads + i]: neighbouring threads, neighbouring banks.
  acc_t* grad_w = now + features;
  const int64_t b = blockIdx.x, radius = taps / 2, threads = blockDim.x;
  for (int64_t k = threadIdx.x; k < taps; k += blockDim.x) weights[k] = kernel[k];
  for (int64_t f = threadIdx.x; f < features; f += blockDim.x) later[f] = 0;  // no step after h_T
  for (int64_t k = 0; k < taps; ++k) grad_w[k * threads + threadIdx.x] = 0;
  __syncthreads();
  // t = time - 1 ... 0 is h_{t+1} (out's row t); t = -1 is h_0 = hidden, which passes dh_0 on.
  for (int64_t t = time - 1; t >= -1; --t) {
    const int64_t row = (b * time + t) * features;
    for (int64_t s = threadIdx.x; s < features; s += blockDim.x) {
      const acc_t h = static_cast<acc_t>(t >= 0 ? out[row + s] : hidden[b * features + s]);
      acc_t dh = 0;
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t dst = s - k + radius;
        if (dst >= 0 && dst < features) {
          dh += weights[k] * later[dst];
          grad_w[k * threads + threadIdx.x] += later[dst] * h;
        }
      }
      if (t < 0) {
        grad_hidden[b * features + s] = static_cast<scalar_t>(dh);
        continue;
      }
      const acc_t dz = (static_cast<acc_t>(grad_out[row + s]) + dh) * (acc_t(1) - h * h);
      now[s] = dz;
      grad_x[row + s] = static_cast<scalar_t>(dz);
    }
    // As in the forward: everyone has read later and written now, so now becomes later.
    __syncthreads();
    acc_t* swap = later;
    later = now;
    now = swap;
  }
  // Past the last barrier every thread's sums are final: one thread per tap adds them up.
  for (int64_t k = threadIdx.x; k < taps; k += blockDim.x) {
    acc_t sum = 0;
    for (int64_t i = 0; i < threads; ++i) sum += grad_w[k * threads + i];
    grad_kernel_partials[b * taps + k] = sum;
  }
}

at::Tensor conv_rnn_cuda(const at::Tensor& x_in, const at::Tensor& kernel_in,
                         const at::Tensor& hidden_in) {
  const int64_t taps = check_conv_rnn(x_in, kernel_in, hidden_in);
  // Any strides in (checks.h): the time loop reads contiguous rows.
  const at::Tensor x = x_in.contiguous(), kernel = kernel_in.contiguous(),
                   hidden = hidden_in.contiguous();
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t batch = x.size(0), time = x.size(1), features = x.size(2);
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

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_rnn_backward_cuda(const at::Tensor& grad_out_in,
                                                                      const at::Tensor& out_in,
                                                                      const at::Tensor& kernel_in,
                                                                      const at::Tensor& hidden_in) {
  const int64_t taps = check_conv_rnn_backward(grad_out_in, out_in, kernel_in, hidden_in);
  const at::Tensor grad_out = grad_out_in.contiguous(), out = out_in.contiguous(),
                   kernel = kernel_in.contiguous(), hidden = hidden_in.contiguous();
  const c10::cuda::CUDAGuard guard(out.device());
  const int64_t batch = out.size(0), time = out.size(1), features = out.size(2);
  at::Tensor grad_x = at::empty(out.sizes(), out.options());
  at::Tensor grad_hidden = at::empty(hidden.sizes(), hidden.options());
  if (batch == 0 || features == 0) {
    return {grad_x, at::zeros(kernel.sizes(), kernel.options()), grad_hidden};
  }
  TORCH_CHECK(batch <= std::numeric_limits<int>::max(), "conv_rnn_backward: batch ", batch,
              " is more than one grid of blocks can hold (", std::numeric_limits<int>::max(), ")");
  // One row of kernel-gradient sums per block, added up after the launch: no atomics, so the
  // same inputs give the same bits on every run.
  at::Tensor partials = at::empty({batch, taps}, out.options().dtype(opmath_dtype(out)));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, out.scalar_type(), "conv_rnn_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        auto kernel_fn = conv_rnn_backward_kernel<scalar_t, acc_t>;
        const int64_t limit =
            static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin);
        // dz double-buffered and the taps, then each thread's sums, one per tap.
        const int64_t fixed = (2 * features + taps) * sizeof(acc_t);
        const int64_t per_thread = taps * sizeof(acc_t);
        // Up to 1024 threads, a multiple of the warp size, none idle when features is small;
        // fewer when their sums would not fit beside dz (the threads then loop over more
        // features each).
        int64_t threads = std::min<int64_t>(1024, ceil_div(features, 32) * 32);
        if (fixed + threads * per_thread > limit) {
          threads = std::max<int64_t>(0, (limit - fixed) / per_thread) / 32 * 32;
        }
        TORCH_CHECK(threads >= 32, "conv_rnn_backward: the hidden state's gradient (2 x ", features,
                    " features), ", taps, " kernel taps and ", taps,
                    " sums for each of 32 threads need ", fixed + 32 * per_thread,
                    " bytes of shared memory, more than the ", limit,
                    " a block can have on this GPU");
        const int64_t shared = fixed + threads * per_thread;
        // Above 48 KiB a kernel must opt in to more shared memory, up to the GPU's limit.
        if (shared > 48 * 1024) {
          C10_CUDA_CHECK(cudaFuncSetAttribute(
              kernel_fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
        }
        kernel_fn<<<batch, static_cast<int>(threads), shared, at::cuda::getCurrentCUDAStream()>>>(
            grad_out.const_data_ptr<scalar_t>(), out.const_data_ptr<scalar_t>(),
            kernel.const_data_ptr<scalar_t>(), hidden.const_data_ptr<scalar_t>(),
            grad_x.mutable_data_ptr<scalar_t>(), grad_hidden.mutable_data_ptr<scalar_t>(),
            partials.mutable_data_ptr<acc_t>(), time, features, taps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  // torch.sum over the batch: a fixed order too (CUDA reductions are deterministic).
  at::Tensor grad_kernel = partials.sum(0).to(kernel.scalar_type()).view(kernel.sizes());
  return {grad_x, grad_kernel, grad_hidden};
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) {
  m.impl("conv_rnn", &conv_rnn_cuda);
  m.impl("conv_rnn_backward", &conv_rnn_backward_cuda);
}

}  // namespace custom_ops::cuda
