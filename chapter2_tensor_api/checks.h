// checks.h: input checks, one helper per property, each naming the op, the argument, what was
// expected and what it got. Every op runs them before it touches data or launches a kernel
// (chapter 2, "Checking inputs"). The same file in chapters 2, 3 and 4, so that each folder
// builds on its own; tests/test_repo.py fails if the copies differ.
#pragma once

#include <ATen/core/Tensor.h>  // at::Tensor, its methods and TORCH_CHECK; not all of ATen

namespace course {

inline void check_cpu(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), op, ": ", name, " must be a CPU tensor, got ", t.device());
}

// The first line of every CUDA launcher: a CPU tensor that got this far is a bug in the caller,
// and this says so instead of failing deep inside a CUDA guard or a kernel.
inline void check_cuda(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor here, got ", t.device());
}

inline void check_floating(const at::Tensor& t, const char* op, const char* name) {
  const auto dtype = t.scalar_type();
  // Exactly the four types the kernels dispatch on (isFloatingType would also let float8 in).
  TORCH_CHECK(
      dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
      op, ": ", name,
      " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ", dtype);
}

// `b` must match `a` in device and dtype: the check every pair of arguments needs.
inline void check_like(const at::Tensor& a, const at::Tensor& b, const char* op, const char* name_a,
                       const char* name_b) {
  TORCH_CHECK(a.device() == b.device(), op, ": ", name_a, " and ", name_b,
              " must be on the same device, got ", a.device(), " and ", b.device());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": ", name_a, " and ", name_b,
              " must have the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
}

inline void check_same_shape(const at::Tensor& a, const at::Tensor& b, const char* op,
                             const char* name_a, const char* name_b) {
  TORCH_CHECK(a.sizes() == b.sizes(), op, ": ", name_a, " and ", name_b,
              " must have the same shape, got ", a.sizes(), " and ", b.sizes());
}

inline void check_dim(const at::Tensor& t, int64_t dim, const char* op, const char* name) {
  TORCH_CHECK(t.dim() == dim, op, ": ", name, " must have ", dim, " dimension(s), got ", t.dim(),
              " (shape ", t.sizes(), ")");
}

inline void check_size(const at::Tensor& t, int64_t dim, int64_t size, const char* op,
                       const char* name) {
  TORCH_CHECK(t.size(dim) == size, op, ": ", name, ".size(", dim, ") must be ", size, ", got ",
              t.size(dim), " (shape ", t.sizes(), ")");
}

// The fused ops' pair: x floating, of rank >= 1; bias alike, of shape (x.size(-1),).
inline void check_bias_op(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  check_floating(x, op, "x");
  check_like(x, bias, op, "x", "bias");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-dim tensor");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op, ": bias must have shape (",
              x.size(-1), ",) to match x.size(-1), got ", bias.sizes());
}

}  // namespace course
