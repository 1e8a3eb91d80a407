// Exercise ch3/leaky_relu, given: what the op (leaky_relu_op.cpp) calls in your kernel file
// (leaky_relu.cu). No torch header here or in leaky_relu.cu beyond c10's scalar types and ATen's
// header-only OpMathType.h: nvcc then compiles your file in seconds instead of a minute and more
// (the lesson says why).
#pragma once

#include <ATen/OpMathType.h>  // at::opmath_type: float for the half types
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ch3_leaky_relu {

// The number of blocks leaky_relu_cuda launches for numel elements; the op checks it first.
int64_t leaky_relu_blocks(int64_t numel);

// out[i] = leaky_relu(x[i]) for i in [0, numel), on the host; the op's CPU loop calls it per chunk.
template <typename scalar_t>
void leaky_relu_cpu(const scalar_t* x, scalar_t* out, int64_t numel, double negative_slope);

// The same on the GPU, leaky_relu_blocks(numel) blocks on `stream`. Returns the launch's error
// (cudaSuccess if none): the op turns it into a Python exception.
template <typename scalar_t>
cudaError_t leaky_relu_cuda(const scalar_t* x, scalar_t* out, int64_t numel, double negative_slope,
                            cudaStream_t stream);

}  // namespace ch3_leaky_relu
