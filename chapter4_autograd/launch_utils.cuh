// launch_utils.cuh: what the kernel files share: 16-byte vectors, the widest vector a pointer's
// alignment allows, and a grid sized to fill the GPU (chapter 3, v2 and v3). The same file in
// chapters 3 and 4, so that each folder builds on its own; tests/test_repo.py fails if they differ.
#pragma once

#include <ATen/cuda/CUDAContextLight.h>  // at::cuda::getCurrentDeviceProperties
#include <c10/cuda/CUDAException.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace course {

// kVec elements that the compiler may move with one instruction: with alignas(16) a float4-sized
// load is one LDG.E.128, the widest load a thread can issue.
template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) AlignedVector {
  scalar_t val[kVec];
};

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
