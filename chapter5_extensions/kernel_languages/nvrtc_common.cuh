// nvrtc_common.cuh: what the NVRTC kernels of this folder share (fused_bias_relu_nvrtc.cu,
// reduce_sum_nvrtc.cu): the compute type of each element and a 16-byte vector. Only CUDA's own
// headers, so that NVRTC compiles in a fraction of a second; the loaders put this folder on
// NVRTC's include path (nvrtc_fused_bias_relu.py, cuda_include_dirs).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// The type each element is computed in (float for the half types, as ATen's opmath_type), and
// the conversions both ways. torch passes -D__CUDA_NO_HALF_CONVERSIONS__ and friends, so the half
// types convert only through these intrinsics.
template <typename T>
struct OpMath {
  using type = T;
  __device__ static T load(T v) { return v; }
  __device__ static T store(T v) { return v; }
};
template <>
struct OpMath<__half> {
  using type = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct OpMath<__nv_bfloat16> {
  using type = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T val[kVec];
};
