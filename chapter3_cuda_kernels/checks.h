// checks.h: input checks for chapter 3's ops. Each names the op, the argument, what was expected
// and what it got; every entry point runs them before it touches data or launches a kernel.
#pragma once

#include <ATen/ATen.h>

namespace course {

inline void check_floating(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": ", name,
              " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ",
              t.scalar_type());
}

inline void check_same_dtype(const at::Tensor& a, const at::Tensor& b, const char* op,
                             const char* name_a, const char* name_b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": ", name_a, " and ", name_b,
              " must have the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
}

inline void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* op,
                              const char* name_a, const char* name_b) {
  TORCH_CHECK(a.device() == b.device(), op, ": ", name_a, " and ", name_b,
              " must be on the same device, got ", a.device(), " and ", b.device());
}

// The first line of every CUDA launcher: a CPU tensor that got this far is a bug in the caller,
// and this says so instead of failing deep inside a CUDA guard or a kernel.
inline void check_cuda(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor here, got ", t.device());
}

// x of any rank >= 1, bias of shape (x.size(-1),), same dtype and device.
inline void check_fused_bias_relu_inputs(const at::Tensor& x, const at::Tensor& bias,
                                         const char* op) {
  check_floating(x, op, "x");
  check_same_dtype(x, bias, op, "x", "bias");
  check_same_device(x, bias, op, "x", "bias");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-dim tensor");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op, ": bias must have shape (",
              x.size(-1), ",) to match x.size(-1), got ", bias.sizes());
}

}  // namespace course
