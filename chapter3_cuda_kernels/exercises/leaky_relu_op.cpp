// Exercise ch3/leaky_relu, given: the op torch.ops.ch3_leaky_relu.leaky_relu around your kernel
// file (leaky_relu.cu): the checks, the dtype dispatch, the CPU threads, the device and stream.
// Torch's headers are here, compiled by the C++ compiler, and never in the .cu file nvcc compiles.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers").
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <limits>

#include "leaky_relu.h"

namespace {

at::Tensor leaky_relu(const at::Tensor& x_in, double negative_slope) {
  TORCH_CHECK(x_in.scalar_type() == at::kFloat || x_in.scalar_type() == at::kDouble ||
                  x_in.scalar_type() == at::kHalf || x_in.scalar_type() == at::kBFloat16,
              "leaky_relu: x must be float32, float64, float16 or bfloat16, got ",
              x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() || x_in.is_cuda(),
              "leaky_relu: x must be on the CPU or a CUDA device, got ", x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty_like(x);
  if (x.numel() == 0) return out;  // no launch with zero blocks
  if (x.is_cuda()) {
    const int64_t blocks = ch3_leaky_relu::leaky_relu_blocks(x.numel());
    TORCH_CHECK(blocks >= 1 && blocks <= std::numeric_limits<int32_t>::max(),
                "leaky_relu: a grid of ", blocks, " blocks for ", x.numel(),
                " elements; a grid has 1 to 2^31 - 1 blocks");
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "leaky_relu", [&] {
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
    if (x.is_cuda()) {
      const c10::cuda::CUDAGuard guard(x.device());
      C10_CUDA_CHECK(ch3_leaky_relu::leaky_relu_cuda(x_data, out_data, x.numel(), negative_slope,
                                                     c10::cuda::getCurrentCUDAStream()));
      return;
    }
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      ch3_leaky_relu::leaky_relu_cpu(x_data + begin, out_data + begin, end - begin, negative_slope);
    });
  });
  return out;
}

}  // namespace

// The op as torch.ops.ch3_leaky_relu.leaky_relu (chapter 5 explains TORCH_LIBRARY; here it is
// only a way in).
TORCH_LIBRARY(ch3_leaky_relu, m) {
  m.def("leaky_relu(Tensor x, float negative_slope=0.01) -> Tensor", &leaky_relu);
}
