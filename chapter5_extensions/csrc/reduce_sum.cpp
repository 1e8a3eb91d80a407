// reduce_sum.cpp: the sum of all elements, on the CPU. CUDA: csrc/cuda/reduce_sum.cu (chapter
// 3's deterministic two-pass v6). Every dtype accumulates in double here: a CPU core waits on
// memory either way, so the wider sum costs nothing visible and is more accurate.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

#include "checks.h"

namespace custom_ops {
namespace {

at::Tensor reduce_sum_cpu(const at::Tensor& x_in) {
  check_floating(x_in, "reduce_sum", "x");
  const at::Tensor x = x_in.contiguous();  // any strides in (checks.h)
  at::Tensor out = at::empty({}, x.options());
  // Fixed chunks, each summed in order, then the chunks' sums in order: the same bits for any
  // number of threads (parallel_reduce would combine in whatever order threads finish).
  constexpr int64_t kChunk = 65536;
  const int64_t numel = x.numel();
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "reduce_sum", [&] {
    const scalar_t* data = x.const_data_ptr<scalar_t>();
    std::vector<double> partial(chunks, 0.0);
    at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        double s = 0;
        for (int64_t i = k * kChunk; i < std::min(numel, (k + 1) * kChunk); ++i) s += data[i];
        partial[k] = s;
      }
    });
    double total = 0;
    for (double s : partial) total += s;
    *out.mutable_data_ptr<scalar_t>() = static_cast<scalar_t>(total);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) { m.impl("reduce_sum", &reduce_sum_cpu); }

}  // namespace custom_ops
