// Exercise ch1/release_gil, reference solution: a long C++ loop that lets other Python threads run
// while it computes, and calls back into Python to report progress. Statement: chapter 1's lesson,
// "Exercises". Check it: make check EX=ch1/release_gil SOLUTION=1

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // std::optional <-> None

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace py = pybind11;

// Trial division: slow on purpose, so that one call takes a noticeable fraction of a second.
bool is_prime(int64_t k) {
  if (k < 2) return false;
  for (int64_t d = 2; d * d <= k; ++d) {
    if (k % d == 0) return false;
  }
  return true;
}

// The number of primes below n. Every report_every numbers (at each k that is a multiple of it)
// calls on_progress(k, primes <= k), if given; an exception it raises stops the count.
int64_t count_primes(int64_t n, const std::optional<py::function>& on_progress,
                     int64_t report_every) {
  if (n < 0) throw std::invalid_argument("count_primes: n must be >= 0, got " + std::to_string(n));
  if (report_every < 1) {
    throw std::invalid_argument("count_primes: report_every must be >= 1, got " +
                                std::to_string(report_every));
  }
  // TODO 1 (solved): from here on the loop touches no Python object, so it lets go of the GIL;
  // the destructor takes it back when the function returns or throws. The arguments were
  // converted before the call, with the GIL held, and are released after it, with it held again.
  py::gil_scoped_release no_gil;
  int64_t count = 0;
  for (int64_t k = 2; k < n; ++k) {
    count += is_prime(k);
    // TODO 2 (solved): calling Python needs the GIL, for as long as the call lasts. If the
    // callback raises, pybind11 throws py::error_already_set; it leaves both scopes (each one
    // restoring the GIL's state) and reaches Python as the callback's own exception.
    if (on_progress && k % report_every == 0) {
      py::gil_scoped_acquire gil;
      (*on_progress)(k, count);
    }
  }
  return count;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Exercise ch1/release_gil: long C++ work that lets other Python threads run.";
  m.def("count_primes", &count_primes,
        "The number of primes below n; calls on_progress(k, primes so far) every report_every.",
        py::arg("n"), py::kw_only(), py::arg("on_progress") = py::none(),
        py::arg("report_every") = 100000);
}
