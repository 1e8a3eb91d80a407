// Exercise ch1/running_mean, reference solution: a C++ class seen from Python, with a constructor,
// methods, read-only and read-write properties and a __repr__. Statement: chapter 1's lesson,
// "Exercises". Check it: make check EX=ch1/running_mean SOLUTION=1

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

  // TODO 1 (solved): keep the mean itself, not a sum: it stays at the scale of the values while a
  // sum grows with the count, and merge() below needs nothing but the count and the mean.
  void add(double x) {
    ++count_;
    mean_ += (x - mean_) / static_cast<double>(count_);
  }
  void add_many(const std::vector<double>& xs) {
    for (double x : xs) add(x);
  }

  // TODO 2 (solved): the merged mean weighs each side by its count; merging an empty side (or
  // into an empty one) must not divide by zero.
  void merge(const RunningMean& other) {
    if (other.count_ == 0) return;
    const int64_t total = count_ + other.count_;
    mean_ +=
        (other.mean_ - mean_) * (static_cast<double>(other.count_) / static_cast<double>(total));
    count_ = total;
  }

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
  // TODO 3 (solved): count and mean have only a getter, so assigning them raises AttributeError;
  // name has both, and its setter's std::invalid_argument arrives as ValueError.
  py::class_<RunningMean>(m, "RunningMean", "The running mean of the values added so far.")
      .def(py::init<std::string>(), py::arg("name"))
      .def("add", &RunningMean::add, "Add one value.", py::arg("x"))
      .def("add_many", &RunningMean::add_many, "Add every value of a list.", py::arg("xs"))
      .def("merge", &RunningMean::merge, "Add every value that `other` has seen.", py::arg("other"))
      .def_property_readonly("count", &RunningMean::count, "How many values were added.")
      .def_property_readonly("mean", &RunningMean::mean, "Their mean (NaN before the first).")
      .def_property("name", &RunningMean::name, &RunningMean::set_name, "A label, not empty.")
      .def("__repr__", &RunningMean::repr);
}
