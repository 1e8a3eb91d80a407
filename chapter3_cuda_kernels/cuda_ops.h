// cuda_ops.h: the CUDA half of chapter 3's ops, as the C++ side sees it. The .cu files define
// these; the .cpp entry points call them for CUDA tensors. Without CUDA (a CPU-only torch, or no
// nvcc) load_chapter3.py builds the .cpp files alone and WITH_CUDA stays undefined.
#pragma once

#include <ATen/ATen.h>

namespace cuda_ops {

// Elementwise: out = relu(x * scale + bias), one kernel version each (fused_bias_relu.cu).
at::Tensor fused_bias_relu_v1(const at::Tensor& x, const at::Tensor& bias, double scale);
at::Tensor fused_bias_relu_v2(const at::Tensor& x, const at::Tensor& bias, double scale);
at::Tensor fused_bias_relu_v3(const at::Tensor& x, const at::Tensor& bias, double scale);
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
at::Tensor sum_columns(const at::Tensor& x);

}  // namespace cuda_ops
