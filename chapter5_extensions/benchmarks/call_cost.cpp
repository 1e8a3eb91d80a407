// call_cost.cpp: one relu registered four ways, for call_cost.py to time a call of each. The
// kernel is the same in all of them (ATen's own relu kernel for the device, called directly, so
// that only the way in differs):
//   call_cost::relu_py          autograd registered from Python (call_cost.py: register_autograd)
//   call_cost::relu_cpp_always  autograd in C++: torch::autograd::Function::apply on every call
//   call_cost::relu_cpp         the same, but a graph node only when an input requires grad, as
//                               custom_ops' csrc/autograd.cpp
//   relu_cpp_direct             a pybind11 function that calls call_cost::relu_cpp's handle from
//                               C++, skipping torch.ops' Python layer
// Built by call_cost.py with torch.utils.cpp_extension.load (host compiler only, no nvcc).

#include <ATen/ops/relu_cpu_dispatch.h>
#include <ATen/ops/threshold_backward.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/utils/pybind.h>  // pybind11 and its at::Tensor caster
#include <torch/library.h>

#ifdef WITH_CUDA
#include <ATen/ops/relu_cuda_dispatch.h>
#endif

namespace {

TORCH_LIBRARY(call_cost, m) {
  m.def("relu_py(Tensor x) -> Tensor");
  m.def("relu_cpp_always(Tensor x) -> Tensor");
  m.def("relu_cpp(Tensor x) -> Tensor");
}

// The kernels, one per device for both ops: at::cpu::relu and at::cuda::relu run ATen's kernel
// without a dispatch of their own.
void check_x(const at::Tensor& x) {
  TORCH_CHECK(x.is_floating_point(), "call_cost::relu: x must be a floating-point tensor, got ",
              x.scalar_type());
}

at::Tensor relu_cpu(const at::Tensor& x) {
  check_x(x);
  return at::cpu::relu(x);
}

TORCH_LIBRARY_IMPL(call_cost, CPU, m) {
  m.impl("relu_py", &relu_cpu);
  m.impl("relu_cpp_always", &relu_cpu);
  m.impl("relu_cpp", &relu_cpu);
}

#ifdef WITH_CUDA
at::Tensor relu_cuda(const at::Tensor& x) {
  check_x(x);
  return at::cuda::relu(x);
}

TORCH_LIBRARY_IMPL(call_cost, CUDA, m) {
  m.impl("relu_py", &relu_cuda);
  m.impl("relu_cpp_always", &relu_cuda);
  m.impl("relu_cpp", &relu_cuda);
}
#endif

// Both C++ variants' kernels, below the autograd key: relu_cpp's handle, looked up once.
at::Tensor relu_below_autograd(const at::Tensor& x) {
  static const auto handle = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("call_cost::relu_cpp", "")
                                 .typed<at::Tensor(const at::Tensor&)>();
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return handle.call(x);
}

// The same shape as custom_ops' csrc/autograd.cpp.
class Relu : public torch::autograd::Function<Relu> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    at::Tensor y = relu_below_autograd(x);
    ctx->save_for_backward({y});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    return {at::threshold_backward(grad_outputs[0], ctx->get_saved_variables()[0], 0)};
  }
};

TORCH_LIBRARY_IMPL(call_cost, Autograd, m) {
  m.impl("relu_cpp_always", [](const at::Tensor& x) { return Relu::apply(x); });
  m.impl("relu_cpp", [](const at::Tensor& x) {
    const bool records_graph = at::GradMode::is_enabled() && x.requires_grad();
    return records_graph ? Relu::apply(x) : relu_below_autograd(x);
  });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def(
      "relu_cpp_direct",
      [](const at::Tensor& x) {
        static const auto handle = c10::Dispatcher::singleton()
                                       .findSchemaOrThrow("call_cost::relu_cpp", "")
                                       .typed<at::Tensor(const at::Tensor&)>();
        return handle.call(x);
      },
      "call_cost::relu_cpp through its C++ handle: the dispatcher, without torch.ops' Python.");
}
