// Exercise ch1/running_mean: a C++ class seen from Python, with a constructor, methods, read-only
// and read-write properties and a __repr__. Statement and hints: chapter 1's lesson, "Exercises".
// Write the three TODOs. Check it: make check EX=ch1/running_mean (check_running_mean.py)

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // std::vector<double> <-> list[float]

#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

// The mean of the values added so far, updated one value at a time, in O(1) memory.
class RunningMean {
 public:
  explicit RunningMean(std::string name) { set_name(name); }

  // TODO 1: count one more value and update the mean, without keeping the values.
  void add(double x) {}
  void add_many(const std::vector<double>& xs) {
    for (double x : xs) add(x);
  }

  // TODO 2: afterwards, count and mean are as if every value `other` saw had been added here
  // too; `other` is left unchanged.
  void merge(const RunningMean& other) {}

  int64_t count() const { return count_; }
  // The mean of no values is NaN, as torch.tensor([]).mean() is.
  double mean() const { return count_ == 0 ? std::numeric_limits<double>::quiet_NaN() : mean_; }
  const std::string& name() const { return name_; }
  void set_name(const std::string& name) {
    if (name.empty()) throw std::invalid_argument("RunningMean: name must not be empty");
    name_ = name;
  }

  // std::ostream prints a double with 6 significant digits, as Python's f"{x:g}" does.
  std::string repr() const {
    std::ostringstream s;
    s << "RunningMean(name='" << name_ << "', count=" << count_ << ", mean=" << mean() << ")";
    return s.str();
  }

 private:
  std::string name_;
  int64_t count_ = 0;
  double mean_ = 0.0;
};

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Exercise ch1/running_mean: a C++ class with methods and properties.";
  // TODO 3: bind merge, the read-only properties count and mean, the read-write property name
  // (getter name(), setter set_name()) and __repr__ (repr()).
  py::class_<RunningMean>(m, "RunningMean", "The running mean of the values added so far.")
      .def(py::init<std::string>(), py::arg("name"))
      .def("add", &RunningMean::add, "Add one value.", py::arg("x"))
      .def("add_many", &RunningMean::add_many, "Add every value of a list.", py::arg("xs"));
}
