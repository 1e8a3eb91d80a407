// ops.cpp: the custom_ops_stable library's schemas, declared once, as ../../csrc/ops.cpp does
// for custom_ops. STABLE_TORCH_LIBRARY is TORCH_LIBRARY's stable twin: it calls PyTorch through
// the C shim (aoti_torch_library_init_def, aoti_torch_library_def) instead of C++ classes whose
// layout changes between releases. Kernels: csrc/<op>.cpp (CPU), csrc/cuda/<op>.cu (CUDA);
// fake kernels and autograd: custom_ops_stable/ops.py.

#include <Python.h>
#include <torch/csrc/stable/library.h>

// Importing custom_ops_stable._C runs the STABLE_TORCH_LIBRARY blocks (static initializers). The
// module itself is empty and uses only Python's stable ABI (py_limited_api in setup.py).
extern "C" PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}

STABLE_TORCH_LIBRARY(custom_ops_stable, m) {
  m.def("relu(Tensor x) -> Tensor");
  m.def("relu_backward(Tensor grad_y, Tensor y) -> Tensor");
  m.def("fused_bias_relu(Tensor x, Tensor bias, float scale) -> Tensor");
  m.def("fused_bias_relu_backward(Tensor grad_y, Tensor y, float scale) -> (Tensor, Tensor)");
}
