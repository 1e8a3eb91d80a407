// checks.h: input checks for chapter 2's ops, one helper per property, each naming the op, the
// argument, what was expected and what it got. Every op checks its inputs with these before it
// touches any data (lesson: "Checking inputs").
#pragma once

#include <torch/extension.h>

#include <initializer_list>

namespace course {

inline void check_cpu(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), op, ": ", name, " must be a CPU tensor, got ", t.device());
}

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

inline void check_dim(const at::Tensor& t, int64_t dim, const char* op, const char* name) {
  TORCH_CHECK(t.dim() == dim, op, ": ", name, " must have ", dim, " dimension(s), got ", t.dim(),
              " (shape ", t.sizes(), ")");
}

inline void check_size(const at::Tensor& t, int64_t dim, int64_t size, const char* op,
                       const char* name) {
  TORCH_CHECK(t.size(dim) == size, op, ": ", name, ".size(", dim, ") must be ", size, ", got ",
              t.size(dim), " (shape ", t.sizes(), ")");
}

}  // namespace course
