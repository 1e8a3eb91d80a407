// cuda_ops.h: the CUDA half of chapter 3's ops, as the C++ side sees it. The .cu files define
// these; the .cpp entry points call them for CUDA tensors. Without CUDA (a CPU-only torch, or no
// nvcc) load_chapter3.py builds the .cpp files alone and WITH_CUDA stays undefined.
#pragma once

// Declaring these needs at::Tensor only. The .cu files take the current stream from
// <c10/cuda/CUDAStream.h> (c10::cuda::getCurrentCUDAStream, which at::cuda:: re-exports) and the
// GPU's properties from <ATen/cuda/CUDAContextLight.h>: the two things most code includes the
// larger <ATen/cuda/CUDAContext.h> for.
#include <ATen/core/Tensor.h>

namespace cuda_ops {

// Elementwise: out = relu(x * scale + bias), one kernel version each (fused_bias_relu.cu).
at::Tensor fused_bias_relu_v1(const at::Tensor& x, const at::Tensor& bias, double scale);
at::Tensor fused_bias_relu_v2(const at::Tensor& x, const at::Tensor& bias, double scale);
// v3 takes its block size as an argument (256 unless block_sweep.py sweeps it).
at::Tensor fused_bias_relu_v3(const at::Tensor& x, const at::Tensor& bias, double scale,
                              int64_t threads = 256);
at::Tensor fused_bias_relu_v4(const at::Tensor& x, const at::Tensor& bias, double scale);
// v4's kernel launched on v2's grid, sized to the GPU: the lesson's comparison of the two launches.
at::Tensor fused_bias_relu_v4_gpu_sized_grid(const at::Tensor& x, const at::Tensor& bias,
                                             double scale);

// Sum of all elements, one kernel version each (reduce_sum.cu). Returns a 0-dim tensor.
enum class SumVersion {
  v0_atomic_per_element,
  v1_interleaved,
  v2_sequential,
  v3_first_add_during_load,
  v4_warp_shuffle,
  v5_vectorized_grid_stride,
  v6_deterministic,
};
at::Tensor sum(const at::Tensor& x, SumVersion version);

// Sum over all leading dimensions: one value per column (per element of the last dimension).
// A block is block_x columns by block_y row lanes (32 x 8 unless block_sweep.py sweeps it).
at::Tensor sum_columns(const at::Tensor& x, int64_t block_x = 32, int64_t block_y = 8);

// Theoretical occupancy for block_sweep.py: the blocks of that size that fit on one SM at once
// (registers, shared memory, the SM's thread and block limits; cudaOccupancy...PerMultiprocessor),
// for the kernel instantiation the op would launch for x.
int64_t fused_bias_relu_v3_blocks_per_sm(const at::Tensor& x, int64_t threads);
int64_t sum_columns_blocks_per_sm(const at::Tensor& x, int64_t block_x, int64_t block_y);

}  // namespace cuda_ops
