// Exercise ch3/max_reduce, given: the op torch.ops.ch3_max_reduce.max_reduce around your kernel
// file (max_reduce.cu): the checks, the dtype dispatch, the CPU threads, the partials' memory, the
// device and stream. Torch's headers are here, compiled by the C++ compiler, and never in the .cu
// file nvcc compiles.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers").
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <limits>

#include "max_reduce.h"

namespace {

at::Tensor max_reduce(const at::Tensor& x_in) {
  TORCH_CHECK(x_in.scalar_type() == at::kFloat || x_in.scalar_type() == at::kDouble ||
                  x_in.scalar_type() == at::kHalf || x_in.scalar_type() == at::kBFloat16,
              "max_reduce: x must be float32, float64, float16 or bfloat16, got ",
              x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() || x_in.is_cuda(),
              "max_reduce: x must be on the CPU or a CUDA device, got ", x_in.device());
  TORCH_CHECK(x_in.numel() > 0, "max_reduce: x is empty; the maximum of no elements is undefined");
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty({}, x.options());  // a 0-dim tensor, like torch.amax(x)
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "max_reduce", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    if (x.is_cuda()) {
      const c10::cuda::CUDAGuard guard(x.device());
      int64_t blocks = 0;
      C10_CUDA_CHECK(ch3_max_reduce::max_reduce_blocks<scalar_t>(x.numel(), &blocks));
      // From PyTorch's caching allocator, on the current stream, like every tensor of the op.
      at::Tensor partials =
          at::empty({blocks}, x.options().dtype(c10::CppTypeToScalarType<opmath_t>::value));
      C10_CUDA_CHECK(ch3_max_reduce::max_reduce_cuda(
          x_data, x.numel(), partials.mutable_data_ptr<opmath_t>(), blocks,
          out.mutable_data_ptr<scalar_t>(), c10::cuda::getCurrentCUDAStream()));
      return;
    }
    // Each CPU thread reduces a chunk from -inf; the chunks' results are then combined in order,
    // each pair by one more step of the same loop.
    const opmath_t result = at::parallel_reduce(
        0, x.numel(), 32768, -std::numeric_limits<opmath_t>::infinity(),
        [&](int64_t begin, int64_t end, opmath_t m) {
          return ch3_max_reduce::max_reduce_cpu(x_data + begin, end - begin, m);
        },
        [](opmath_t a, opmath_t b) { return ch3_max_reduce::max_reduce_cpu(&b, 1, a); });
    *out.mutable_data_ptr<scalar_t>() = static_cast<scalar_t>(result);
  });
  return out;
}

}  // namespace

// The op as torch.ops.ch3_max_reduce.max_reduce (chapter 5 explains TORCH_LIBRARY; here it is
// only a way in).
TORCH_LIBRARY(ch3_max_reduce, m) { m.def("max_reduce(Tensor x) -> Tensor", &max_reduce); }
