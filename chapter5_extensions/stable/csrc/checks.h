// checks.h: the stable-ABI twin of ../../csrc/checks.h: input checks that name the op, the
// argument, what was expected and what came, and the type half types compute in. Only
// torch/csrc/stable and torch/headeronly: no ATen, no c10 (the ABI audit, abi_audit.py, checks).
//
// What the stable API lacks here in torch 2.11, and the workaround:
// - TORCH_CHECK: STD_TORCH_CHECK (torch/headeronly/util/Exception.h) throws std::runtime_error,
//   which PyTorch turns into Python's RuntimeError, as TORCH_CHECK's c10::Error. It prefixes the
//   message with the function, file and line; the tests match the op's part of it.
// - operator<< for a Device or a shape: device_name() and shape_string() below.
// - at::opmath_type: opmath_type below (half types compute in float, as custom_ops's kernels do).
//
// Strides: as in custom_ops, any strides in, contiguous out. torch::stable::contiguous (2.10+)
// returns the tensor itself when it already is contiguous, one copy for a view.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace custom_ops_stable {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

inline std::string device_name(const torch::stable::Device& device) {
  std::ostringstream out;
  switch (device.type()) {
    case torch::headeronly::DeviceType::CPU:
      out << "cpu";
      break;
    case torch::headeronly::DeviceType::CUDA:
      out << "cuda";
      break;
    default:
      out << "device type " << static_cast<int>(device.type());
  }
  if (device.has_index()) out << ":" << static_cast<int>(device.index());
  return out.str();
}

inline std::string shape_string(const Tensor& t) {
  std::ostringstream out;
  out << "[";
  for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
  out << "]";
  return out.str();
}

inline void check_floating(const Tensor& t, const char* op, const char* name) {
  const ScalarType dtype = t.scalar_type();
  // Exactly the four types the kernels dispatch on.
  STD_TORCH_CHECK(dtype == ScalarType::Float || dtype == ScalarType::Double ||
                      dtype == ScalarType::Half || dtype == ScalarType::BFloat16,
                  op, ": ", name,
                  " must be a floating-point tensor (float32, float64, float16 or bfloat16), got ",
                  torch::headeronly::toString(dtype));
}

// `b` must match `a` in dtype and device.
inline void check_like(const Tensor& a, const Tensor& b, const char* op, const char* name_a,
                       const char* name_b) {
  STD_TORCH_CHECK(a.device() == b.device(), op, ": ", name_a, " and ", name_b,
                  " must be on the same device, got ", device_name(a.device()), " and ",
                  device_name(b.device()));
  STD_TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": ", name_a, " and ", name_b,
                  " must have the same dtype, got ", torch::headeronly::toString(a.scalar_type()),
                  " and ", torch::headeronly::toString(b.scalar_type()));
}

inline void check_same_shape(const Tensor& a, const Tensor& b, const char* op, const char* name_a,
                             const char* name_b) {
  STD_TORCH_CHECK(a.sizes().equals(b.sizes()), op, ": ", name_a, " and ", name_b,
                  " must have the same shape, got ", shape_string(a), " and ", shape_string(b));
}

// x of rank >= 1 and bias of shape (x.size(-1),), both floating and alike.
inline void check_bias_op(const Tensor& x, const Tensor& bias, const char* op) {
  check_floating(x, op, "x");
  check_like(x, bias, op, "x", "bias");
  STD_TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-dim tensor");
  STD_TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op, ": bias must have shape (",
                  x.size(-1), ",) to match x.size(-1), got ", shape_string(bias));
}

// Half types compute in float, float in float, double in double (at::opmath_type's rule).
template <typename scalar_t>
using opmath_type = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

inline ScalarType opmath_dtype(const Tensor& t) {
  return t.scalar_type() == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

}  // namespace custom_ops_stable

// double, float and both half types (float16, bfloat16): AT_DISPATCH_FLOATING_TYPES_AND2(kHalf,
// kBFloat16, ...) is ATen's; the header-only API has the same switch as THO_DISPATCH_SWITCH/
// THO_DISPATCH_CASE (torch/headeronly/core/Dispatch.h), which define scalar_t in each case as
// AT_DISPATCH does.
#define STABLE_DISPATCH_FLOATING_AND_HALF_TYPES(TYPE, NAME, ...)                  \
  THO_DISPATCH_SWITCH(                                                            \
      TYPE, NAME,                                                                 \
      THO_DISPATCH_CASE(torch::headeronly::ScalarType::Double, __VA_ARGS__)       \
          THO_DISPATCH_CASE(torch::headeronly::ScalarType::Float, __VA_ARGS__)    \
              THO_DISPATCH_CASE(torch::headeronly::ScalarType::Half, __VA_ARGS__) \
                  THO_DISPATCH_CASE(torch::headeronly::ScalarType::BFloat16, __VA_ARGS__))
