// Exercise ch1/keyword_args: a C++ function that Python calls like
// `clamp_scale(values, factor=2.0, *, lo=-inf, hi=inf)`. Statement and hints: chapter 1's lesson,
// "Exercises". Write the two TODOs. Check it: make check EX=ch1/keyword_args
// (check_keyword_args.py)

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // std::vector<double> <-> list[float]

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

// TODO 1: out[i] = values[i] * factor, clamped to [lo, hi].
std::vector<double> clamp_scale(const std::vector<double>& values, double factor, double lo,
                                double hi) {
  if (!(lo <= hi)) {  // written so that a NaN bound is refused too
    throw std::invalid_argument("clamp_scale: lo must be <= hi, got lo=" + std::to_string(lo) +
                                ", hi=" + std::to_string(hi));
  }
  std::vector<double> out(values.size());
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Exercise ch1/keyword_args: named, default and keyword-only arguments.";
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // TODO 2: name the arguments values, factor, lo, hi; give factor the default 2.0, lo -inf and
  // hi +inf; make lo and hi keyword-only; and give the function a docstring that says what it
  // returns. As it stands, Python sees clamp_scale(arg0, arg1, arg2, arg3) with no defaults.
  m.def("clamp_scale", &clamp_scale);
}
