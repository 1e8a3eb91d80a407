// launch_utils.cuh: what the CUDA kernels of custom_ops_stable share, the stable-ABI twin of
// ../../../csrc/cuda/launch_utils.cuh: 16-byte vectors, the widest vector every pointer is aligned
// for, a grid that fills the GPU, and the guard + stream every launcher starts with.
//
// What the stable API lacks in torch 2.11, and the workaround:
// - c10::cuda::CUDAGuard: torch::stable::accelerator::DeviceGuard (the same RAII, via the shim).
// - at::cuda::getCurrentCUDAStream: the raw shim call aoti_torch_get_current_cuda_stream, declared
//   only with -DUSE_CUDA (setup.py); current_stream() below wraps it.
// - C10_CUDA_CHECK, C10_CUDA_KERNEL_LAUNCH_CHECK: STD_CUDA_CHECK, STD_CUDA_KERNEL_LAUNCH_CHECK
//   (torch/csrc/stable/macros.h, 2.10+), which format c10's message through the shim.
// - at::cuda::getCurrentDeviceProperties: cudaDeviceGetAttribute, the CUDA runtime's own.
#pragma once

#include <cuda_runtime.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "../checks.h"

namespace custom_ops_stable::cuda {

constexpr int kThreads = 256;

template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) AlignedVector {
  scalar_t val[kVec];
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// PyTorch's current stream on the tensor's device: what at::cuda::getCurrentCUDAStream() returns.
inline cudaStream_t current_stream(const Tensor& t) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(t.get_device_index(), &stream));
  return static_cast<cudaStream_t>(stream);
}

// Enough blocks to fill every SM as far as the kernel's resources allow, and no more.
template <typename Kernel>
int64_t blocks_to_fill_gpu(Kernel kernel, int threads_per_block, size_t shared_bytes = 0) {
  int blocks_per_sm = 0;
  STD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel,
                                                               threads_per_block, shared_bytes));
  STD_TORCH_CHECK(blocks_per_sm > 0, "custom_ops_stable: a kernel cannot fit one block of ",
                  threads_per_block,
                  " threads on an SM (too many registers or too much shared memory)");
  int device = 0, sm_count = 0;
  STD_CUDA_CHECK(cudaGetDevice(&device));
  STD_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  return static_cast<int64_t>(sm_count) * blocks_per_sm;
}

// The widest vector (in elements, at most 16 bytes) at which every pointer is aligned and, when
// `divides` is nonzero, that divides it. A view such as x[1:] is contiguous but starts one element
// in: it gets 1, not a misaligned load.
template <typename scalar_t>
int vector_width(std::initializer_list<const void*> pointers, int64_t divides) {
  int width = 16 / static_cast<int>(sizeof(scalar_t));
  for (const void* p : pointers) {
    while (width > 1 && reinterpret_cast<std::uintptr_t>(p) % (width * sizeof(scalar_t)) != 0) {
      width /= 2;
    }
  }
  while (divides != 0 && width > 1 && divides % width != 0) width /= 2;
  return width;
}

// Calls launch(std::integral_constant<int, W>{}) with W = vector_width(pointers, divides): one
// kernel instantiation per width.
template <typename scalar_t, typename Launch>
void with_vector_width(std::initializer_list<const void*> pointers, int64_t divides,
                       Launch launch) {
  switch (vector_width<scalar_t>(pointers, divides)) {
    case 8:
      if constexpr (16 / sizeof(scalar_t) >= 8) launch(std::integral_constant<int, 8>{});
      break;
    case 4:
      if constexpr (16 / sizeof(scalar_t) >= 4) launch(std::integral_constant<int, 4>{});
      break;
    case 2:
      launch(std::integral_constant<int, 2>{});
      break;
    default:
      launch(std::integral_constant<int, 1>{});
  }
}

}  // namespace custom_ops_stable::cuda
