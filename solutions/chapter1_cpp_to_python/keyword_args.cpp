// Exercise ch1/keyword_args, reference solution: a C++ function that Python calls like
// `clamp_scale(values, factor=2.0, *, lo=-inf, hi=inf)`. Statement: chapter 1's lesson,
// "Exercises". Check it: make check EX=ch1/keyword_args SOLUTION=1

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // std::vector<double> <-> list[float]

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

// TODO 1 (solved): scale first, then clamp, so lo and hi bound the result, not the input.
// std::clamp(v, lo, hi) would do too; min/max say the order of the two bounds plainly.
std::vector<double> clamp_scale(const std::vector<double>& values, double factor, double lo,
                                double hi) {
  if (!(lo <= hi)) {  // written so that a NaN bound is refused too
    throw std::invalid_argument("clamp_scale: lo must be <= hi, got lo=" + std::to_string(lo) +
                                ", hi=" + std::to_string(hi));
  }
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = std::min(std::max(values[i] * factor, lo), hi);
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Exercise ch1/keyword_args: named, default and keyword-only arguments.";
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // TODO 2 (solved): the names, the defaults and the `*` are the binding's, not the function's:
  // C++ has no keyword arguments, so pybind11 learns them from py::arg. The docstring comes first;
  // pybind11 puts the signature line above it.
  m.def("clamp_scale", &clamp_scale,
        "Return [min(max(v * factor, lo), hi) for v in values]: scale each value, then clamp it.",
        py::arg("values"), py::arg("factor") = 2.0, py::kw_only(), py::arg("lo") = -kInf,
        py::arg("hi") = kInf);
}
