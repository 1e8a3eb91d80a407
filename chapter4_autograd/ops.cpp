// ops.cpp: chapter 4's relu and fused_bias_relu, forward and backward: input checks, the CPU
// implementations, the choice of device; and the Python module. The CUDA kernels are in
// fused_bias_relu.cu, the LSTM cell in lstm_cell.cpp, the C++ autograd version in
// autograd_cpp.cpp. Built by load_chapter4.py.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>  // y <= 0, active_grad * scale
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/utils/pybind.h>  // pybind11, and the caster between torch.Tensor and at::Tensor

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "checks.h"
#include "cuda_ops.h"
#include "ops.h"

namespace {

[[noreturn]] void no_cuda(const char* op) {
  TORCH_CHECK(false, op,
              ": got a CUDA tensor, but this module was built without CUDA (load_chapter4.py "
              "found no nvcc or a CPU-only torch)");
}

// Half types compute in float, as the kernels do; float64 in double.
c10::ScalarType opmath_dtype(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// Chapter 2's parallel loop (v3), copied so that this folder builds on its own.
at::Tensor fused_bias_relu_forward_cpu(const at::Tensor& x_in, const at::Tensor& bias_in,
                                       double scale) {
  const at::Tensor x = x_in.contiguous();
  const at::Tensor bias = bias_in.contiguous();
  at::Tensor y = at::empty_like(x);
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, cols));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "fused_bias_relu_forward", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        const scalar_t* x_data = x.const_data_ptr<scalar_t>();
        const scalar_t* bias_data = bias.const_data_ptr<scalar_t>();
        scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
        const auto s = static_cast<opmath_t>(scale);
        at::parallel_for(0, rows, grain_rows, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin * cols; i < end * cols; ++i) {
            const opmath_t v =
                static_cast<opmath_t>(x_data[i]) * s + static_cast<opmath_t>(bias_data[i % cols]);
            y_data[i] = static_cast<scalar_t>(v < opmath_t(0) ? opmath_t(0) : v);
          }
        });
      });
  return y;
}

// The backward on the CPU in ATen: the same formulas as the CUDA kernel, computed in opmath.
std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward_cpu(const at::Tensor& grad_y,
                                                                const at::Tensor& y, double scale,
                                                                bool need_grad_x,
                                                                bool need_grad_bias) {
  // Zero where y <= 0 (not "keep where y > 0"): a NaN output passes its gradient on.
  const at::Tensor active_grad = at::where(
      y <= 0, at::zeros({}, y.options().dtype(opmath_dtype(y))), grad_y.to(opmath_dtype(y)));
  at::Tensor grad_x, grad_bias;
  if (need_grad_x) grad_x = (active_grad * scale).to(y.scalar_type());
  if (need_grad_bias) {
    const int64_t cols = y.size(-1);
    const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
    grad_bias = active_grad.reshape({rows, cols}).sum(0).to(y.scalar_type());
  }
  return {grad_x, grad_bias};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> relu_forward(const at::Tensor& x) {
  course::check_floating(x, "relu_forward", "x");
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    return cuda_ops::relu_forward(x);
#else
    no_cuda("relu_forward");
#endif
  }
  at::Tensor y = at::relu(x);
  return {y, y.le(0).logical_not_()};  // NaN counts as active, as in the CUDA kernel
}

at::Tensor relu_backward(const at::Tensor& grad_y, const at::Tensor& mask) {
  const char* op = "relu_backward";
  course::check_floating(grad_y, op, "grad_y");
  TORCH_CHECK(mask.scalar_type() == at::kBool, op, ": mask must be a bool tensor, got ",
              mask.scalar_type());
  TORCH_CHECK(mask.device() == grad_y.device(), op,
              ": grad_y and mask must be on the same device, got ", grad_y.device(), " and ",
              mask.device());
  course::check_same_shape(grad_y, mask, op, "grad_y", "mask");
  if (grad_y.is_cuda()) {
#ifdef WITH_CUDA
    return cuda_ops::relu_backward(grad_y, mask);
#else
    no_cuda(op);
#endif
  }
  return at::where(mask, grad_y, at::zeros({}, grad_y.options()));
}

at::Tensor fused_bias_relu_forward(const at::Tensor& x, const at::Tensor& bias, double scale) {
  const char* op = "fused_bias_relu_forward";
  course::check_bias_op(x, bias, op);
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    return cuda_ops::fused_bias_relu_forward(x, bias, scale);
#else
    no_cuda(op);
#endif
  }
  return fused_bias_relu_forward_cpu(x, bias, scale);
}

std::tuple<at::Tensor, at::Tensor> fused_bias_relu_backward(const at::Tensor& grad_y,
                                                            const at::Tensor& y, double scale,
                                                            bool need_grad_x, bool need_grad_bias) {
  const char* op = "fused_bias_relu_backward";
  course::check_floating(y, op, "y");
  course::check_like(y, grad_y, op, "y", "grad_y");
  course::check_same_shape(y, grad_y, op, "y", "grad_y");
  TORCH_CHECK(y.dim() >= 1, op, ": y must have at least 1 dimension, got a 0-dim tensor");
  if (y.is_cuda()) {
#ifdef WITH_CUDA
    return cuda_ops::fused_bias_relu_backward(grad_y, y, scale, need_grad_x, need_grad_bias);
#else
    no_cuda(op);
#endif
  }
  return fused_bias_relu_backward_cpu(grad_y, y, scale, need_grad_x, need_grad_bias);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 4: forward and backward kernels for custom autograd ops.";
#ifdef WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("relu_forward", &relu_forward, "(relu(x), mask): mask is False where relu(x) <= 0",
        py::arg("x"));
  m.def("relu_backward", &relu_backward, "grad_y where mask, else 0", py::arg("grad_y"),
        py::arg("mask"));
  m.def("fused_bias_relu_forward", &fused_bias_relu_forward, "relu(x * scale + bias)", py::arg("x"),
        py::arg("bias"), py::arg("scale") = 1.0);
  m.def("fused_bias_relu_backward", &fused_bias_relu_backward,
        "(grad_x or None, grad_bias or None) from grad_y and the forward's output y",
        py::arg("grad_y"), py::arg("y"), py::arg("scale"), py::arg("need_grad_x") = true,
        py::arg("need_grad_bias") = true);
  m.def("lstm_cell_forward", &lstm_cell_forward,
        "One LSTM step: [h_next, c_next, gates (activated i, f, g, o), tanh(c_next)]", py::arg("x"),
        py::arg("h"), py::arg("c"), py::arg("w_ih"), py::arg("w_hh"), py::arg("b_ih"),
        py::arg("b_hh"));
  m.def("lstm_cell_backward", &lstm_cell_backward,
        "[grad_x, grad_h, grad_c, grad_w_ih, grad_w_hh, grad_bias], None where needs is False",
        py::arg("grad_h_next"), py::arg("grad_c_next"), py::arg("x"), py::arg("h"), py::arg("c"),
        py::arg("w_ih"), py::arg("w_hh"), py::arg("gates"), py::arg("tanh_c_next"),
        py::arg("needs"));
  m.def("fused_bias_relu_cpp_autograd", &fused_bias_relu_cpp_autograd,
        "relu(x * scale + bias) as a C++ torch::autograd::Function: differentiable from C++ alone",
        py::arg("x"), py::arg("bias"), py::arg("scale") = 1.0);
}
