// Exercise ch3/gelu: GELU (tanh approximation) on the CPU and as a CUDA kernel that moves 16 bytes
// per load and store. Statement and hints: chapter 3's lesson, "Exercises". Write the two TODOs.
// Check it: make check EX=ch3/gelu    (the checks, and the speed to reach: check_gelu.py)
//
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
//   the reference: torch.nn.functional.gelu(x, approximate="tanh")

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>

namespace {

// TODO 1: the formula, for one element, in the type we compute in (float for half types). The
// CPU loop and the kernel below both call it, so the CPU checks test it on any machine.
template <typename opmath_t>
__host__ __device__ inline opmath_t gelu_tanh(opmath_t x) {
  return x;  // replace: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
}

template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) AlignedVector {
  scalar_t val[kVec];
};

// TODO 2: out[i] = gelu_tanh(x[i]) for all numel elements, with a grid-stride loop over vectors
// of kVec elements: load one AlignedVector with one instruction, compute each element in opmath_t,
// store one vector. Then the last numel % kVec elements (fewer than kVec), one per thread. Indices
// are int64_t: numel can exceed 2^31.
template <typename scalar_t, int kVec>
__global__ void gelu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                            int64_t numel) {}

// ---- given: the launch, the CPU loop, the checks, the registration -----------------------------

template <typename scalar_t>
void launch_gelu(const at::Tensor& x, at::Tensor& out) {
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
  const int64_t numel = x.numel();
  // The widest vector (at most 16 bytes) at which both pointers are aligned: a view such as
  // x[1:] starts one element into its buffer and must go one element at a time.
  int vec = 16 / static_cast<int>(sizeof(scalar_t));
  while (vec > 1 && (reinterpret_cast<std::uintptr_t>(x_data) % (vec * sizeof(scalar_t)) != 0 ||
                     reinterpret_cast<std::uintptr_t>(out_data) % (vec * sizeof(scalar_t)) != 0)) {
    vec /= 2;
  }
  constexpr int kThreads = 256;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  // One launch of gelu_kernel<scalar_t, kVec>: enough blocks for every vector (and the tail), but
  // no more than this GPU holds at once (the occupancy API: blocks per SM for this kernel, times
  // the SMs); the grid-stride loop covers the rest.
  auto launch = [&](auto kernel, int kVec) {
    int device = 0, sm_count = 0, blocks_per_sm = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, kThreads, 0));
    const int64_t blocks = std::min<int64_t>((numel / kVec + kThreads) / kThreads,
                                             static_cast<int64_t>(sm_count) * blocks_per_sm);
    kernel<<<blocks, kThreads, 0, stream>>>(x_data, out_data, numel);
  };
  switch (vec) {
    case 8:
      launch(gelu_kernel<scalar_t, 8>, 8);
      break;
    case 4:
      launch(gelu_kernel<scalar_t, 4>, 4);
      break;
    case 2:
      launch(gelu_kernel<scalar_t, 2>, 2);
      break;
    default:
      launch(gelu_kernel<scalar_t, 1>, 1);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor gelu(const at::Tensor& x_in) {
  TORCH_CHECK(x_in.scalar_type() == at::kFloat || x_in.scalar_type() == at::kDouble ||
                  x_in.scalar_type() == at::kHalf || x_in.scalar_type() == at::kBFloat16,
              "gelu: x must be float32, float64, float16 or bfloat16, got ", x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() || x_in.is_cuda(), "gelu: x must be on the CPU or a CUDA device, got ",
              x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty_like(x);
  if (x.numel() == 0) return out;  // no launch with zero blocks
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    if (x.is_cuda()) {
      const c10::cuda::CUDAGuard guard(x.device());
      launch_gelu<scalar_t>(x, out);
      return;
    }
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        out_data[i] = static_cast<scalar_t>(gelu_tanh(static_cast<opmath_t>(x_data[i])));
      }
    });
  });
  return out;
}

}  // namespace

// The op as torch.ops.ch3_gelu.gelu (chapter 5 explains TORCH_LIBRARY; here it is only a way in).
TORCH_LIBRARY(ch3_gelu, m) { m.def("gelu(Tensor x) -> Tensor", &gelu); }
