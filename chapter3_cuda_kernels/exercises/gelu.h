// Exercise ch3/gelu, given: what the op (gelu_op.cpp) calls in your kernel file (gelu.cu). No
// torch header here or in gelu.cu beyond c10's scalar types and ATen's header-only OpMathType.h:
// nvcc then compiles your file in seconds instead of a minute and more (the lesson's "Exercises"
// says why).
#pragma once

#include <ATen/OpMathType.h>  // at::opmath_type: float for the half types
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ch3_gelu {

// out[i] = gelu(x[i]) for i in [0, numel), on the host; the op's CPU loop calls it per chunk.
template <typename scalar_t>
void gelu_cpu(const scalar_t* x, scalar_t* out, int64_t numel);

// The same on the GPU, launched on `stream`. Returns the first CUDA error (cudaSuccess if none):
// the op turns it into a Python exception.
template <typename scalar_t>
cudaError_t gelu_cuda(const scalar_t* x, scalar_t* out, int64_t numel, cudaStream_t stream);

}  // namespace ch3_gelu
