// call_cost.cpp: one relu registered three ways, for call_cost.py to time a call of each. The
// kernel is the same in all three (ATen's own relu kernel for the device, called directly, so
// that only the way in differs):
//   call_cost::relu_py   autograd registered from Python (call_cost.py: register_autograd)
//   call_cost::relu_cpp  autograd registered here, in C++ (torch::autograd::Function)
//   relu_cpp_direct      a pybind11 function that calls call_cost::relu_cpp's handle from C++,
//                        skipping torch.ops' Python layer
// Built by call_cost.py with torch.utils.cpp_extension.load (host compiler only, no nvcc).

#include <ATen/ops/relu_cpu_dispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/extension.h>
#include <torch/library.h>

#ifdef WITH_CUDA
#include <ATen/ops/relu_cuda_dispatch.h>
#endif

namespace {

TORCH_LIBRARY(call_cost, m) {
  m.def("relu_py(Tensor x) -> Tensor");
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
  m.impl("relu_cpp", &relu_cpu);
}

#ifdef WITH_CUDA
at::Tensor relu_cuda(const at::Tensor& x) {
  check_x(x);
  return at::cuda::relu(x);
}

TORCH_LIBRARY_IMPL(call_cost, CUDA, m) {
  m.impl("relu_py", &relu_cuda);
  m.impl("relu_cpp", &relu_cuda);
}
#endif

const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&)>& relu_cpp_handle() {
  static const auto handle = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("call_cost::relu_cpp", "")
                                 .typed<at::Tensor(const at::Tensor&)>();
  return handle;
}

// The same shape as custom_ops' csrc/autograd.cpp.
class Relu : public torch::autograd::Function<Relu> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor y = relu_cpp_handle().call(x);
    ctx->save_for_backward({y});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    return {at::threshold_backward(grad_outputs[0], ctx->get_saved_variables()[0], 0)};
  }
};

TORCH_LIBRARY_IMPL(call_cost, Autograd, m) {
  m.impl("relu_cpp", [](const at::Tensor& x) { return Relu::apply(x); });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def(
      "relu_cpp_direct", [](const at::Tensor& x) { return relu_cpp_handle().call(x); },
      "call_cost::relu_cpp through its C++ handle: the dispatcher, without torch.ops' Python.");
}
