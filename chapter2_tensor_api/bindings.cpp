// bindings.cpp: chapter 2's Python module, one m.def per op. The ops live in their own files;
// this file only declares and binds them, so a change to one op recompiles one file.

// pybind11, and the caster that turns a Python tensor into an at::Tensor and back: all a module
// of tensor functions needs, for a tenth of <torch/extension.h>'s compile time (chapter 1).
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <vector>

at::Tensor fused_bias_relu_v1_aten(const at::Tensor& x, const at::Tensor& bias, double scale);
at::Tensor fused_bias_relu_v2_loop(const at::Tensor& x, const at::Tensor& bias, double scale);
at::Tensor fused_bias_relu_v3_parallel(const at::Tensor& x, const at::Tensor& bias, double scale);
int64_t parallel_for_thread_count(int64_t chunks);
std::vector<at::Tensor> lstm_cell_forward(const at::Tensor& x, const at::Tensor& h,
                                          const at::Tensor& c, const at::Tensor& w_ih,
                                          const at::Tensor& w_hh, const at::Tensor& b_ih,
                                          const at::Tensor& b_hh);
at::Tensor matmul_loop(const at::Tensor& a, const at::Tensor& b);
at::Tensor matmul_batched(const at::Tensor& a, const at::Tensor& b);
at::Tensor matmul_via_column_major_gemm(const at::Tensor& a, const at::Tensor& b);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 2: the ATen tensor API in C++.";
  const char* fbr_doc = "relu(x * scale + bias), bias over the last dimension of x.";
  m.def("fused_bias_relu_v1_aten", &fused_bias_relu_v1_aten, fbr_doc, py::arg("x"), py::arg("bias"),
        py::arg("scale") = 1.0);
  m.def("fused_bias_relu_v2_loop", &fused_bias_relu_v2_loop, fbr_doc, py::arg("x"), py::arg("bias"),
        py::arg("scale") = 1.0);
  m.def("fused_bias_relu_v3_parallel", &fused_bias_relu_v3_parallel, fbr_doc, py::arg("x"),
        py::arg("bias"), py::arg("scale") = 1.0);
  m.def("parallel_for_thread_count", &parallel_for_thread_count,
        "How many threads at::parallel_for ran `chunks` chunks on (1 if built without -fopenmp).",
        py::arg("chunks"));
  m.def("lstm_cell_forward", &lstm_cell_forward,
        "One LSTM step: returns [h_next, c_next, gates (i, f, g, o activated), tanh(c_next)].",
        py::arg("x"), py::arg("h"), py::arg("c"), py::arg("w_ih"), py::arg("w_hh"), py::arg("b_ih"),
        py::arg("b_hh"));
  m.def("matmul_loop", &matmul_loop, "out[t] = a[t] @ b[t], one mm call per t.", py::arg("a"),
        py::arg("b"));
  m.def("matmul_batched", &matmul_batched, "out = bmm(a, b): one call.", py::arg("a"),
        py::arg("b"));
  m.def("matmul_via_column_major_gemm", &matmul_via_column_major_gemm,
        "a @ b for row-major float32 matrices, computed by a column-major (BLAS-style) GEMM.",
        py::arg("a"), py::arg("b"));
}
