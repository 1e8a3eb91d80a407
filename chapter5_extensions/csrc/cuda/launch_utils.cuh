// launch_utils.cuh: what the CUDA kernels of custom_ops share (chapter 3's helpers): 16-byte
// vectors, the widest vector every pointer is aligned for, a grid that fills the GPU, and the
// guard + stream every launcher starts with.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace custom_ops::cuda {

constexpr int kThreads = 256;

template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) AlignedVector {
  scalar_t val[kVec];
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Enough blocks to fill every SM as far as the kernel's resources allow, and no more.
template <typename Kernel>
int64_t blocks_to_fill_gpu(Kernel kernel, int threads_per_block, size_t shared_bytes = 0) {
  int blocks_per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel,
                                                               threads_per_block, shared_bytes));
  TORCH_CHECK(blocks_per_sm > 0, "custom_ops: a kernel cannot fit one block of ", threads_per_block,
              " threads on an SM (too many registers or too much shared memory)");
  const int sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  return static_cast<int64_t>(sm_count) * blocks_per_sm;
}

// The grid of a grid-stride kernel with a thread per element of `work`: one block per kThreads
// elements, but no more blocks than fill the GPU (the loop covers the rest).
template <typename Kernel>
int64_t grid_for(Kernel kernel, int64_t work) {
  return std::min(ceil_div(work, kThreads), blocks_to_fill_gpu(kernel, kThreads));
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

inline void check_cuda(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor here, got ", t.device());
}

}  // namespace custom_ops::cuda
