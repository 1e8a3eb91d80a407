// ops.cpp: every operator of the custom_ops library, declared once. A schema is the op's
// contract with PyTorch: its name, argument types and what it returns. The kernels are
// registered per device next to their code (csrc/<op>.cpp for the CPU, csrc/cuda/<op>.cu for
// CUDA); fake kernels and autograd are registered in Python (custom_ops/ops.py).

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <Python.h>
#include <torch/library.h>

#include "lstm.h"  // set_lstm_paths

// Importing custom_ops._C runs the TORCH_LIBRARY blocks below (static initializers). The module
// itself is empty: no pybind11, the ops live in torch.ops.custom_ops, and the .so depends on the
// stable Python ABI only (py_limited_api in setup.py).
extern "C" PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}

TORCH_LIBRARY(custom_ops, m) {
  m.def("relu(Tensor x) -> Tensor");
  m.def("relu_backward(Tensor grad_y, Tensor y) -> Tensor");
  m.def("fused_bias_relu(Tensor x, Tensor bias, float scale) -> Tensor");
  m.def("fused_bias_relu_backward(Tensor grad_y, Tensor y, float scale) -> (Tensor, Tensor)");
  m.def("reduce_sum(Tensor x) -> Tensor");
  m.def(
      "lstm_cell(Tensor x, Tensor h, Tensor c, Tensor w_ih, Tensor w_hh, Tensor b_ih, "
      "Tensor b_hh) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "lstm_cell_backward(Tensor grad_h, Tensor grad_c, Tensor x, Tensor h, Tensor c, "
      "Tensor w_ih, Tensor w_hh, Tensor gates, Tensor tanh_c, "
      "bool[6] output_mask=[True, True, True, True, True, True]) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("conv_rnn(Tensor x, Tensor kernel, Tensor hidden) -> Tensor");
  // The backward reads the forward's output, not x: -> grad_x, grad_kernel, grad_hidden.
  m.def(
      "conv_rnn_backward(Tensor grad_out, Tensor out, Tensor kernel, Tensor hidden) "
      "-> (Tensor, Tensor, Tensor)");
  // A whole LSTM layer: -> y, h_n, c_n, and the gates and cell states that lstm_backward reads.
  m.def(
      "lstm(Tensor x, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, Tensor b_ih, Tensor b_hh) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "lstm_backward(Tensor grad_y, Tensor grad_hn, Tensor grad_cn, Tensor x, Tensor h0, "
      "Tensor w_ih, Tensor w_hh, Tensor y, Tensor gates, Tensor cs) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  // One direction of one layer over a packed batch (a PackedSequence's data and batch_sizes),
  // forward or in reverse, with an optional projection w_hr (csrc/lstm.h): -> y, h_n, c_n, and
  // the gates, cell states, r and each step's starting h that lstm_packed_backward reads.
  m.def(
      "lstm_packed(Tensor x, Tensor batch_sizes, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, "
      "Tensor b_ih, Tensor b_hh, Tensor? w_hr, bool reverse) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "lstm_packed_backward(Tensor grad_y, Tensor grad_hn, Tensor grad_cn, Tensor x, "
      "Tensor batch_sizes, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, Tensor? w_hr, "
      "bool reverse, Tensor gates, Tensor cs, Tensor r, Tensor h_prev) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  // Not a computation: the paths lstm takes on CUDA (csrc/lstm.h), for tests and benchmarks;
  // custom_ops.lstm_paths in Python. One kernel for every device: it takes no tensor.
  m.def(
      "_lstm_paths(str persistent=\"\", str step_graphs=\"\", str tensor_cores=\"\", "
      "str clusters=\"\") -> str[]",
      &custom_ops::set_lstm_paths);
}
