// Exercise ch1/errors: C++ exceptions that arrive in Python as the right exception, with a
// message that says what was wrong: ValueError, IndexError and a class of our own. Statement and
// hints: chapter 1's lesson, "Exercises". Write the four TODOs.
// Check it: make check EX=ch1/errors    (the checks: check_errors.py)

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

// Two shapes that cannot be broadcast together. Registered below as the Python class
// BroadcastError, a subclass of ValueError.
struct BroadcastError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// TODO 1: a dimension is one or more decimal digits, nothing else, and fits in int64_t.
// Otherwise throw std::invalid_argument with the message "parse_shape: bad dimension '<part>' in
// '<text>'", or "parse_shape: dimension '<part>' in '<text>' is too large". std::stoll is not
// strict enough (try " 3", "+3" and "3abc"), and its errors are not the ones Python should see.
int64_t parse_dimension(const std::string& part, const std::string& text) {
  return std::stoll(part);
}

// "3x4x5" -> {3, 4, 5}; "" -> {} (the shape of a scalar).
std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  if (text.empty()) return shape;
  size_t start = 0;
  while (true) {
    const size_t end = text.find('x', start);
    shape.push_back(parse_dimension(text.substr(start, end - start), text));
    if (end == std::string::npos) return shape;
    start = end + 1;
  }
}

// TODO 2: dim counts from the end when negative, as Python's indices do; outside [-ndim, ndim)
// throw std::out_of_range("shape_dim: dim <dim> is out of range for <ndim> dimensions").
int64_t shape_dim(const std::string& text, int64_t dim) {
  const std::vector<int64_t> shape = parse_shape(text);
  return shape.at(dim);
}

// TODO 3: the shape a and b broadcast to, as torch.broadcast_shapes computes it. When two sizes
// do not match, throw BroadcastError("broadcast_shapes: '<a>' and '<b>' do not broadcast: size
// <size in a> vs <size in b> at dim -<i>"), i counting dimensions from the right, from 1.
std::vector<int64_t> broadcast_shapes(const std::string& a_text, const std::string& b_text) {
  return {};
}

// A shape is a tuple in Python, as torch.Size is; std::vector would arrive as a list.
py::tuple to_tuple(const std::vector<int64_t>& shape) {
  py::tuple out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Exercise ch1/errors: C++ exceptions as Python exceptions.";
  m.def(
      "parse_shape", [](const std::string& text) { return to_tuple(parse_shape(text)); },
      "Parse '3x4x5' into (3, 4, 5); ValueError for anything else.", py::arg("text"));
  m.def("shape_dim", &shape_dim, "Size of dimension dim (negative counts from the end).",
        py::arg("text"), py::arg("dim"));
  m.def(
      "broadcast_shapes",
      [](const std::string& a, const std::string& b) { return to_tuple(broadcast_shapes(a, b)); },
      "The shape that a and b broadcast to; BroadcastError if they do not.", py::arg("a"),
      py::arg("b"));
  // TODO 4: register BroadcastError as the Python exception errors.BroadcastError, a subclass of
  // ValueError. Until then, Python sees a thrown BroadcastError as a RuntimeError.
}
