// launch_utils.cuh: chapter 3's launch helpers, copied so this folder builds on its own: 16-byte
// vectors, the widest vector a pointer allows, a grid that fills the GPU.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

namespace course {

// kVec elements that the compiler may move with one instruction: with alignas(16) a float4-sized
// load is one LDG.E.128, the widest load a thread can issue.
template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) AlignedVector {
  scalar_t val[kVec];
};

// The widest vector (in elements, at most 16 bytes) at which every pointer is aligned. A view
// such as x[1:] starts 4 bytes into a float buffer, so it gets width 1: vectorized code must
// either check this or read past the start of a row.
template <typename scalar_t>
int max_vector_width(std::initializer_list<const void*> pointers) {
  int width = 16 / static_cast<int>(sizeof(scalar_t));
  for (const void* p : pointers) {
    while (width > 1 && reinterpret_cast<std::uintptr_t>(p) % (width * sizeof(scalar_t)) != 0) {
      width /= 2;
    }
  }
  return width;
}

// Enough blocks to fill every SM as far as the kernel's registers and shared memory allow, and no
// more: a grid-stride loop then hands each resident thread its share of the work.
template <typename Kernel>
int64_t blocks_to_fill_gpu(Kernel kernel, int threads_per_block) {
  int blocks_per_sm = 0;
  C10_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, threads_per_block, 0));
  const int sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  return static_cast<int64_t>(sm_count) * blocks_per_sm;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace course
