// Exercise ch1/errors, reference solution: C++ exceptions that arrive in Python as the right
// exception, with a message that says what was wrong: ValueError, IndexError and a class of our
// own. Statement: chapter 1's lesson, "Exercises". Check it: make check EX=ch1/errors SOLUTION=1

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

// TODO 1 (solved): digits only, checked by hand. std::stoll would accept " 3", "+3", "-3" and
// "3abc" (it stops at the first non-digit), and throws std::out_of_range for a number too large,
// which Python would see as an IndexError.
int64_t parse_dimension(const std::string& part, const std::string& text) {
  const bool digits_only = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  if (!digits_only) {
    throw std::invalid_argument("parse_shape: bad dimension '" + part + "' in '" + text + "'");
  }
  int64_t value = 0;
  for (char c : part) {
    const int digit = c - '0';
    if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
      throw std::invalid_argument("parse_shape: dimension '" + part + "' in '" + text +
                                  "' is too large");
    }
    value = value * 10 + digit;
  }
  return value;
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

// TODO 2 (solved): Python's negative indices count from the end; anything outside
// [-ndim, ndim) is std::out_of_range, which pybind11 turns into IndexError.
int64_t shape_dim(const std::string& text, int64_t dim) {
  const std::vector<int64_t> shape = parse_shape(text);
  const auto ndim = static_cast<int64_t>(shape.size());
  if (dim < -ndim || dim >= ndim) {
    throw std::out_of_range("shape_dim: dim " + std::to_string(dim) + " is out of range for " +
                            std::to_string(ndim) + " dimensions");
  }
  return shape[dim < 0 ? dim + ndim : dim];
}

// TODO 3 (solved): align the shapes on the right; a missing dimension counts as 1. Sizes match
// when they are equal or one of them is 1, and the result takes the other one.
std::vector<int64_t> broadcast_shapes(const std::string& a_text, const std::string& b_text) {
  const std::vector<int64_t> a = parse_shape(a_text), b = parse_shape(b_text);
  const size_t ndim = std::max(a.size(), b.size());
  std::vector<int64_t> out(ndim);
  for (size_t i = 1; i <= ndim; ++i) {  // the i-th dimension from the right, dim -i
    const int64_t size_a = i <= a.size() ? a[a.size() - i] : 1;
    const int64_t size_b = i <= b.size() ? b[b.size() - i] : 1;
    if (size_a != size_b && size_a != 1 && size_b != 1) {
      throw BroadcastError("broadcast_shapes: '" + a_text + "' and '" + b_text +
                           "' do not broadcast: size " + std::to_string(size_a) + " vs " +
                           std::to_string(size_b) + " at dim -" + std::to_string(i));
    }
    out[ndim - i] = size_a == 1 ? size_b : size_a;
  }
  return out;
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
  // TODO 4 (solved): without this line a BroadcastError reaches Python as a plain RuntimeError
  // (it is a std::runtime_error). With it, Python code can catch BroadcastError or ValueError.
  py::register_exception<BroadcastError>(m, "BroadcastError", PyExc_ValueError);
}
