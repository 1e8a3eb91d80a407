// Exercise ch3/max_reduce, given: what the op (max_reduce_op.cpp) calls in your kernel file
// (max_reduce.cu). No torch header here or in max_reduce.cu beyond c10's scalar types and ATen's
// header-only OpMathType.h: nvcc then compiles your file in seconds instead of a minute and more
// (the lesson says why).
#pragma once

#include <ATen/OpMathType.h>  // at::opmath_type: float for the half types
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ch3_max_reduce {

// max(init, x[0], ..., x[numel - 1]) on the host, NaN if any is NaN; the op's CPU threads call it
// per chunk, and once more per pair of chunks' results.
template <typename scalar_t>
at::opmath_type<scalar_t> max_reduce_cpu(const scalar_t* x, int64_t numel,
                                         at::opmath_type<scalar_t> init);

// How many blocks max_reduce_cuda's first pass runs for numel elements: one partial each, which
// the op allocates. Returns the first CUDA error (cudaSuccess if none).
template <typename scalar_t>
cudaError_t max_reduce_blocks(int64_t numel, int64_t* blocks);

// *out = the maximum of x's numel elements on the GPU, on `stream`, through `blocks` partials.
// Returns the first CUDA error (cudaSuccess if none): the op turns it into a Python exception.
template <typename scalar_t>
cudaError_t max_reduce_cuda(const scalar_t* x, int64_t numel, at::opmath_type<scalar_t>* partials,
                            int64_t blocks, scalar_t* out, cudaStream_t stream);

}  // namespace ch3_max_reduce
