// checks.h: the helpers every custom_ops source shares: input checks that name the op, the
// argument, what was expected and what came; the type half types compute in; and the handle by
// which C++ calls one of the library's ops through the dispatcher.
//
// Strides: every op takes any strides, as PyTorch's own do. The kernels walk contiguous memory, so
// each entry point calls .contiguous() on its inputs first: free for a contiguous tensor (it
// returns the tensor itself), one extra read and write for a view such as x.t() or x[:, ::2].
// PyTorch's elementwise ops read such views in place (TensorIterator computes each element's
// address from the strides); for the course's kernels one copy is the simpler price, paid only
// by the rare caller who passes a view.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace custom_ops {

inline void check_floating(const at::Tensor& t, const char* op, const char* name) {
  const auto dtype = t.scalar_type();
  // Exactly the four types the kernels dispatch on (isFloatingType would also let float8 in).
  TORCH_CHECK(
      dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
      op, ": ", name,
      " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ", dtype);
}

// `b` must match `a` in dtype and device.
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

// x of rank >= 1 and bias of shape (x.size(-1),), both floating and alike.
inline void check_bias_op(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  check_floating(x, op, "x");
  check_like(x, bias, op, "x", "bias");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-dim tensor");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op, ": bias must have shape (",
              x.size(-1), ",) to match x.size(-1), got ", bias.sizes());
}

// The op `name` ("custom_ops::relu"), typed by its C++ signature. Look it up once (keep it in a
// static) and call it like a function: the call goes through the dispatcher from the top, less the
// keys a guard at the call site excludes (autograd.cpp, autocast.cpp).
template <typename Signature>
c10::TypedOperatorHandle<Signature> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// Half types compute in float, float in float, double in double.
inline c10::ScalarType opmath_dtype(c10::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}
inline c10::ScalarType opmath_dtype(const at::Tensor& t) { return opmath_dtype(t.scalar_type()); }

}  // namespace custom_ops
