// addone.cpp: the smallest Python extension module there is, one C++ function called from Python.
// Build and run it any of three ways (chapter 1 lesson, "Three ways to build"):
//   python chapter1_cpp_to_python/load_chapter1.py      JIT: torch.utils.cpp_extension.load
//   python chapter1_cpp_to_python/load_inline_example.py JIT from a string: load_inline
//   pip install --no-build-isolation ./chapter1_cpp_to_python   ahead of time: setup.py

// Only pybind11, not <torch/extension.h>: this module touches no tensor, and the torch header
// alone takes most of a minute to compile on a small machine (measured in the lesson).
#include <pybind11/pybind11.h>

int addone(int x) { return x + 1; }

// A compile-time stamp, so a notebook can tell which build of the module it has loaded.
const char* build_info() { return "addone.cpp compiled " __DATE__ " " __TIME__; }

// TORCH_EXTENSION_NAME is passed by the build (-DTORCH_EXTENSION_NAME=<name>): Python imports a
// module by the name its init function carries, so the name in the code must be the file's.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 1: the smallest extension, addone(x) = x + 1.";
  m.def("addone", &addone, "Return x + 1.", pybind11::arg("x"));
  m.def("build_info", &build_info, "When this build of the module was compiled.");
}
