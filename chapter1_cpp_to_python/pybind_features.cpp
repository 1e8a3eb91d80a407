// pybind_features.cpp: what pybind11 does for you beyond addone, one feature per section.
// Built by load_chapter1.py (python chapter1_cpp_to_python/load_chapter1.py); tested in
// test_chapter1.py; the lesson (README.md, "Beyond addone") walks through it section by section.

// Not <torch/extension.h>, all of torch's C++ API: pybind11 and torch's tensor caster are all
// this file needs, at a fraction of the compile time (lesson: "Narrow headers").
#include <torch/csrc/utils/pybind.h>  // pybind11, and at::Tensor <-> torch.Tensor (section 6)
#include <pybind11/stl.h>  // std::vector <-> list, std::map <-> dict, std::optional <-> None

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;

// ---- 1. Containers: std::vector and std::map are converted to and from list and dict ----------
// A conversion copies every element, in and out; crossing with a big list is not free (see the
// crossing-cost benchmark).

double sum_list(const std::vector<double>& values) {
  double total = 0.0;
  for (double v : values) total += v;
  return total;
}

std::vector<int64_t> add_one_to_each(const std::vector<int64_t>& values) {
  std::vector<int64_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] + 1;
  return out;
}

std::map<std::string, int64_t> word_lengths(const std::vector<std::string>& words) {
  std::map<std::string, int64_t> lengths;
  for (const auto& w : words) lengths[w] = static_cast<int64_t>(w.size());
  return lengths;
}

// ---- 2. Keyword and default arguments: declared with py::arg in the binding below -----------

std::vector<double> scale_and_shift(const std::vector<double>& values, double scale, double shift) {
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] * scale + shift;
  return out;
}

// ---- 3. Exceptions: C++ exceptions become Python exceptions -----------------------------------
// pybind11 maps the standard ones (std::invalid_argument -> ValueError, std::out_of_range ->
// IndexError, std::runtime_error -> RuntimeError); our own type gets a Python class of its own,
// registered in the module below.

struct StatsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

double checked_sqrt(double x) {
  if (std::isnan(x) || x < 0.0) {
    throw std::invalid_argument("checked_sqrt: x must be >= 0, got " + std::to_string(x));
  }
  return std::sqrt(x);
}

// ---- 4. A class: constructor, methods, read-only and read-write properties, __repr__ ---------
// Running mean and variance by Welford's method (one pass, numerically stable).

class RunningStats {
 public:
  explicit RunningStats(std::string name) : name_(std::move(name)) {}

  void push(double x) {
    ++count_;
    const double delta = x - mean_;
    mean_ += delta / static_cast<double>(count_);
    m2_ += delta * (x - mean_);
  }
  void push_many(const std::vector<double>& xs) {
    for (double x : xs) push(x);
  }

  int64_t count() const { return count_; }
  double mean() const {
    if (count_ == 0) throw StatsError("RunningStats '" + name_ + "': mean of no values");
    return mean_;
  }
  // Sample variance (divides by count - 1, like torch.var's default).
  double variance() const {
    if (count_ < 2) {
      throw StatsError("RunningStats '" + name_ + "': variance needs at least 2 values, got " +
                       std::to_string(count_));
    }
    return m2_ / static_cast<double>(count_ - 1);
  }
  const std::string& name() const { return name_; }
  void set_name(const std::string& name) {
    if (name.empty()) throw std::invalid_argument("RunningStats: name must not be empty");
    name_ = name;
  }

  std::string repr() const {
    std::ostringstream s;
    s << "RunningStats(name='" << name_ << "', count=" << count_;
    if (count_ > 0) s << ", mean=" << mean_;
    s << ")";
    return s.str();
  }

 private:
  std::string name_;
  int64_t count_ = 0;
  double mean_ = 0.0;
  double m2_ = 0.0;
};

// ---- 5. The GIL: release it around long C++ work so other Python threads can run --------------
// A C++ function called from Python holds the GIL, so no other Python thread runs meanwhile.
// While C++ touches no Python object it may let go of it; py::gil_scoped_release does that and
// takes it back when it goes out of scope (also if an exception leaves the scope).

// Counts primes below n by trial division: plain CPU work, long enough to see on a clock.
int64_t count_primes_below(int64_t n) {
  int64_t count = 0;
  for (int64_t k = 2; k < n; ++k) {
    bool prime = true;
    for (int64_t d = 2; d * d <= k; ++d) {
      if (k % d == 0) {
        prime = false;
        break;
      }
    }
    count += prime;
  }
  return count;
}

int64_t count_primes(int64_t n, bool release_gil) {
  std::optional<py::gil_scoped_release> no_gil;
  if (release_gil) no_gil.emplace();
  return count_primes_below(n);
}

// A meeting point for `parties` threads: arrive() returns true once all have arrived, false if
// they have not after timeout_s. Two Python threads can only meet here if each let go of the
// GIL while waiting: this turns "the threads really overlap" into a yes/no a test can check,
// with no timing threshold to tune.
class Rendezvous {
 public:
  explicit Rendezvous(int64_t parties) : parties_(parties) {
    if (parties < 1) throw std::invalid_argument("Rendezvous: parties must be >= 1");
  }

  bool arrive(double timeout_s, bool release_gil) {
    std::optional<py::gil_scoped_release> no_gil;
    if (release_gil) no_gil.emplace();
    arrived_.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
    while (arrived_.load() < parties_) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

 private:
  const int64_t parties_;
  std::atomic<int64_t> arrived_{0};
};

// ---- 6. Tensors: a teaser for chapter 2 -----------------------------------------------------
// A torch.Tensor crosses into C++ as an at::Tensor, without copying: C++ sees the same storage
// Python does.

std::string describe_tensor(const at::Tensor& t) {
  std::ostringstream s;
  s << "Tensor(dtype=" << t.dtype() << ", shape=" << t.sizes() << ", device=" << t.device()
    << ", contiguous=" << (t.is_contiguous() ? "True" : "False") << ")";
  return s.str();
}

// Adds 1 to every element in place, through the raw pointer. TORCH_CHECK throws c10::Error,
// which torch's own exception translator turns into a Python RuntimeError carrying the message.
at::Tensor add_one_(at::Tensor t) {
  TORCH_CHECK(t.device().is_cpu(), "add_one_: t must be a CPU tensor, got ", t.device());
  TORCH_CHECK(t.scalar_type() == at::kFloat, "add_one_: t must be float32, got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), "add_one_: t must be contiguous (call .contiguous() first)");
  float* data = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) data[i] += 1.0f;
  return t;
}

// Takes a tensor and gives it back: the cost of a tensor crossing the boundary, nothing else.
at::Tensor tensor_identity(at::Tensor t) { return t; }

const char* build_info() { return "pybind_features.cpp compiled " __DATE__ " " __TIME__; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 1: pybind11 features beyond addone.";

  m.def("noop", [] {}, "Do nothing: the bare cost of calling into C++.");
  m.def("sum_list", &sum_list, "Sum a list of floats.", py::arg("values"));
  m.def("add_one_to_each", &add_one_to_each,
        "Return [v + 1 for v in values], the loop done in C++ (one crossing for the whole list).",
        py::arg("values"));
  m.def("word_lengths", &word_lengths, "Map each word to its length: list[str] -> dict.",
        py::arg("words"));

  // py::arg("scale") = 1.0 gives a default; py::kw_only() makes what follows keyword-only, as
  // `def scale_and_shift(values, scale=1.0, *, shift=0.0)` would.
  m.def("scale_and_shift", &scale_and_shift, "Return [v * scale + shift for v in values].",
        py::arg("values"), py::arg("scale") = 1.0, py::kw_only(), py::arg("shift") = 0.0);

  m.def("checked_sqrt", &checked_sqrt, "sqrt(x); ValueError when x < 0.", py::arg("x"));
  // StatsError raised in C++ arrives in Python as pybind_features.StatsError, a ValueError.
  py::register_exception<StatsError>(m, "StatsError", PyExc_ValueError);

  py::class_<RunningStats>(m, "RunningStats", "Running mean and variance (Welford).")
      .def(py::init<std::string>(), py::arg("name"))
      .def("push", &RunningStats::push, "Add one value.", py::arg("x"))
      .def("push_many", &RunningStats::push_many, "Add every value of a list.", py::arg("xs"))
      .def_property_readonly("count", &RunningStats::count)
      .def_property_readonly("mean", &RunningStats::mean)
      .def_property_readonly("variance", &RunningStats::variance)
      .def_property("name", &RunningStats::name, &RunningStats::set_name)
      .def("__repr__", &RunningStats::repr);

  m.def("count_primes", &count_primes,
        "Count the primes below n. With release_gil=True other Python threads run meanwhile.",
        py::arg("n"), py::arg("release_gil") = true);
  py::class_<Rendezvous>(m, "Rendezvous", "A meeting point for threads.")
      .def(py::init<int64_t>(), py::arg("parties"))
      .def("arrive", &Rendezvous::arrive,
           "Wait until all parties arrived (True) or timeout_s passed (False).",
           py::arg("timeout_s"), py::arg("release_gil") = true);

  m.def("describe_tensor", &describe_tensor, "dtype, shape, device and layout of a tensor.",
        py::arg("t"));
  m.def("add_one_", &add_one_, "Add 1 in place to a contiguous float32 CPU tensor.", py::arg("t"));
  m.def("tensor_identity", &tensor_identity, "Return t: the cost of passing a tensor.",
        py::arg("t"));
  m.def("build_info", &build_info, "When this build of the module was compiled.");
}
