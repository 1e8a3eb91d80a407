// checks.h: input checks for chapter 4's ops. Each names the op, the argument, what was expected
// and what it got; every op runs them before it touches data or launches a kernel.
#pragma once

#include <ATen/ATen.h>

namespace course {

inline void check_floating(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": ", name,
              " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ",
              t.scalar_type());
}

// `b` must match `a` in dtype and device (the check every pair of arguments needs).
inline void check_like(const at::Tensor& a, const at::Tensor& b, const char* op, const char* name_a,
                       const char* name_b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": ", name_a, " and ", name_b,
              " must have the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), op, ": ", name_a, " and ", name_b,
              " must be on the same device, got ", a.device(), " and ", b.device());
}

inline void check_same_shape(const at::Tensor& a, const at::Tensor& b, const char* op,
                             const char* name_a, const char* name_b) {
  TORCH_CHECK(a.sizes() == b.sizes(), op, ": ", name_a, " and ", name_b,
              " must have the same shape, got ", a.sizes(), " and ", b.sizes());
}

inline void check_cuda(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor here, got ", t.device());
}

// x of any rank >= 1, bias of shape (x.size(-1),).
inline void check_bias_for(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-dim tensor");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op, ": bias must have shape (",
              x.size(-1), ",) to match x.size(-1), got ", bias.sizes());
}

}  // namespace course
