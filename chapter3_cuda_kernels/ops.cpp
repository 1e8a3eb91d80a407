// ops.cpp: chapter 3's Python module. Every op checks its inputs, then runs on the tensor's
// device: the CUDA kernels of fused_bias_relu.cu and reduce_sum.cu, or a CPU implementation
// (so every op works, and is tested, on a machine without a GPU). Built by load_chapter3.py.

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
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/utils/pybind.h>  // pybind11, and the caster between torch.Tensor and at::Tensor

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>

#include "checks.h"
#include "cuda_ops.h"

namespace {

// ---- CPU implementations -----------------------------------------------------------------------

// Chapter 2's v3 (a parallel loop over rows), copied so that this folder builds on its own.
at::Tensor fused_bias_relu_cpu(const at::Tensor& x_in, const at::Tensor& bias_in, double scale) {
  const at::Tensor x = x_in.contiguous();
  const at::Tensor bias = bias_in.contiguous();
  at::Tensor out = at::empty_like(x);
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, cols));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_cpu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        const scalar_t* x_data = x.const_data_ptr<scalar_t>();
        const scalar_t* bias_data = bias.const_data_ptr<scalar_t>();
        scalar_t* out_data = out.mutable_data_ptr<scalar_t>();
        const auto s = static_cast<opmath_t>(scale);
        at::parallel_for(0, rows, grain_rows, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin * cols; i < end * cols; ++i) {
            const opmath_t v =
                static_cast<opmath_t>(x_data[i]) * s + static_cast<opmath_t>(bias_data[i % cols]);
            out_data[i] = static_cast<scalar_t>(v < opmath_t(0) ? opmath_t(0) : v);
          }
        });
      });
  return out;
}

// A sum on the CPU is ATen's: chapter 2 covered CPU loops, and this chapter's subject is the GPU.
// Half types accumulate in float, like the kernels.
c10::ScalarType accumulate_type(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

at::Tensor sum_cpu(const at::Tensor& x) {
  return at::sum(x, accumulate_type(x)).to(x.scalar_type());
}

at::Tensor sum_columns_cpu(const at::Tensor& x) {
  if (x.size(-1) == 0) return at::zeros({0}, x.options());
  return x.reshape({-1, x.size(-1)})
      .sum(0, /*keepdim=*/false, accumulate_type(x))
      .to(x.scalar_type());
}

// ---- entry points: check, then pick the device -------------------------------------------------

[[noreturn]] void no_cuda(const char* op) {
  TORCH_CHECK(false, op,
              ": got a CUDA tensor, but this module was built without CUDA (load_chapter3.py "
              "found no nvcc or a CPU-only torch)");
}

using CudaFusedBiasRelu = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, double)>;

at::Tensor fused_bias_relu(const at::Tensor& x, const at::Tensor& bias, double scale,
                           const char* op, [[maybe_unused]] CudaFusedBiasRelu cuda_version) {
  course::check_bias_op(x, bias, op);
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    return cuda_version(x, bias, scale);
#else
    no_cuda(op);
#endif
  }
  TORCH_CHECK(x.is_cpu(), op, ": x must be a CPU or CUDA tensor, got ", x.device());
  return fused_bias_relu_cpu(x, bias, scale);
}

at::Tensor sum(const at::Tensor& x, cuda_ops::SumVersion version, const char* op) {
  course::check_floating(x, op, "x");
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    return cuda_ops::sum(x, version);
#else
    no_cuda(op);
#endif
  }
  TORCH_CHECK(x.is_cpu(), op, ": x must be a CPU or CUDA tensor, got ", x.device());
  return sum_cpu(x);
}

// block_x, block_y: the CUDA kernel's block shape (block_sweep.py); the CPU has no blocks.
at::Tensor sum_columns(const at::Tensor& x, int64_t block_x, int64_t block_y) {
  course::check_floating(x, "sum_columns", "x");
  TORCH_CHECK(x.dim() >= 1, "sum_columns: x must have at least 1 dimension, got a 0-dim tensor");
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    return cuda_ops::sum_columns(x, block_x, block_y);
#else
    no_cuda("sum_columns");
#endif
  }
  TORCH_CHECK(x.is_cpu(), "sum_columns: x must be a CPU or CUDA tensor, got ", x.device());
  return sum_columns_cpu(x);
}

}  // namespace

#ifndef WITH_CUDA
// Without CUDA the kernels' launchers do not exist; these stand in for them so the module links.
// The entry points above never call them: they stop at no_cuda() first.
namespace cuda_ops {
at::Tensor fused_bias_relu_v1(const at::Tensor&, const at::Tensor&, double) { no_cuda("v1"); }
at::Tensor fused_bias_relu_v2(const at::Tensor&, const at::Tensor&, double) { no_cuda("v2"); }
at::Tensor fused_bias_relu_v3(const at::Tensor&, const at::Tensor&, double, int64_t) {
  no_cuda("v3");
}
at::Tensor fused_bias_relu_v4(const at::Tensor&, const at::Tensor&, double) { no_cuda("v4"); }
at::Tensor fused_bias_relu_v4_gpu_sized_grid(const at::Tensor&, const at::Tensor&, double) {
  no_cuda("v4_gpu_sized_grid");
}
}  // namespace cuda_ops
#endif

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 3: CUDA kernels for tensors (every op also runs on the CPU).";
#ifdef WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif

  const char* fbr_doc = "relu(x * scale + bias), bias over the last dimension of x.";
  m.def(
      "fused_bias_relu_v1",
      [](const at::Tensor& x, const at::Tensor& bias, double scale) {
        return fused_bias_relu(x, bias, scale, "fused_bias_relu_v1", cuda_ops::fused_bias_relu_v1);
      },
      fbr_doc, py::arg("x"), py::arg("bias"), py::arg("scale") = 1.0);
  m.def(
      "fused_bias_relu_v2",
      [](const at::Tensor& x, const at::Tensor& bias, double scale) {
        return fused_bias_relu(x, bias, scale, "fused_bias_relu_v2", cuda_ops::fused_bias_relu_v2);
      },
      fbr_doc, py::arg("x"), py::arg("bias"), py::arg("scale") = 1.0);
  m.def(
      "fused_bias_relu_v3",
      [](const at::Tensor& x, const at::Tensor& bias, double scale, int64_t threads) {
        return fused_bias_relu(
            x, bias, scale, "fused_bias_relu_v3",
            [threads](const at::Tensor& x, const at::Tensor& bias, double scale) {
              return cuda_ops::fused_bias_relu_v3(x, bias, scale, threads);
            });
      },
      "relu(x * scale + bias), bias over the last dimension of x; threads: the CUDA block size "
      "(the CPU ignores it).",
      py::arg("x"), py::arg("bias"), py::arg("scale") = 1.0, py::arg("threads") = 256);
  m.def(
      "fused_bias_relu_v4",
      [](const at::Tensor& x, const at::Tensor& bias, double scale) {
        return fused_bias_relu(x, bias, scale, "fused_bias_relu_v4", cuda_ops::fused_bias_relu_v4);
      },
      fbr_doc, py::arg("x"), py::arg("bias"), py::arg("scale") = 1.0);
  m.def(
      "fused_bias_relu_v4_gpu_sized_grid",
      [](const at::Tensor& x, const at::Tensor& bias, double scale) {
        return fused_bias_relu(x, bias, scale, "fused_bias_relu_v4_gpu_sized_grid",
                               cuda_ops::fused_bias_relu_v4_gpu_sized_grid);
      },
      "v4's kernel on v2's grid, sized to the GPU: the lesson's comparison.", py::arg("x"),
      py::arg("bias"), py::arg("scale") = 1.0);

  using V = cuda_ops::SumVersion;
  const std::pair<const char*, V> sums[] = {
      {"sum_v0_atomic_per_element", V::v0_atomic_per_element},
      {"sum_v1_interleaved", V::v1_interleaved},
      {"sum_v2_sequential", V::v2_sequential},
      {"sum_v3_first_add_during_load", V::v3_first_add_during_load},
      {"sum_v4_warp_shuffle", V::v4_warp_shuffle},
      {"sum_v5_vectorized_grid_stride", V::v5_vectorized_grid_stride},
      {"sum_v6_deterministic", V::v6_deterministic},
  };
  for (const auto& [name, version] : sums) {
    m.def(
        name,
        [name = name, version = version](const at::Tensor& x) { return sum(x, version, name); },
        "The sum of all elements of x, as a 0-dim tensor of x's dtype.", py::arg("x"));
  }
  m.def("sum_columns", &sum_columns,
        "The sum over all leading dimensions: one value per element of x's last dimension. "
        "block_x, block_y: the CUDA block's shape, columns by row lanes (the CPU ignores it).",
        py::arg("x"), py::arg("block_x") = 32, py::arg("block_y") = 8);

  // Theoretical occupancy (block_sweep.py): blocks per SM for the kernel the op would launch on x.
#ifdef WITH_CUDA
  m.def("fused_bias_relu_v3_blocks_per_sm", &cuda_ops::fused_bias_relu_v3_blocks_per_sm,
        "Blocks of `threads` threads of fused_bias_relu_v3's kernel for x that fit on one SM.",
        py::arg("x"), py::arg("threads"));
  m.def("sum_columns_blocks_per_sm", &cuda_ops::sum_columns_blocks_per_sm,
        "Blocks of block_x x block_y threads of sum_columns' kernel for x that fit on one SM.",
        py::arg("x"), py::arg("block_x"), py::arg("block_y"));
#endif
}
