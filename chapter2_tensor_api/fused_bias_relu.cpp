// fused_bias_relu.cpp: out = relu(x * scale + bias) on the CPU, bias over the last dimension,
// in three versions that diff cleanly (lesson: "One op, three ways"):
//   v1 composed from ATen ops    three passes over memory, two temporaries
//   v2 one raw loop              one pass, one thread, any floating dtype via AT_DISPATCH
//   v3 the loop, parallel        v2's loop split over rows with at::parallel_for
// Built by load_chapter2.py; tested in test_chapter2.py; timed by benchmark.py.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>  // x * scale + bias
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/relu.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "checks.h"

namespace {

void check_fused_bias_relu_inputs(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  course::check_cpu(x, op, "x");
  course::check_cpu(bias, op, "bias");
  course::check_floating(x, op, "x");
  course::check_like(x, bias, op, "x", "bias");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension, got a 0-dim tensor");
  course::check_dim(bias, 1, op, "bias");
  TORCH_CHECK(bias.size(0) == x.size(-1), op, ": bias must have ", x.size(-1),
              " elements (x.size(-1)), got ", bias.size(0));
}

// The loop body both v2 and v3 run over rows [row_begin, row_end) of a contiguous (rows, cols)
// view. Half types are computed in float (at::opmath_type) and rounded once, on the store.
template <typename scalar_t>
void fused_bias_relu_rows(const scalar_t* x, const scalar_t* bias, scalar_t* out, int64_t row_begin,
                          int64_t row_end, int64_t cols, at::opmath_type<scalar_t> scale) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const scalar_t* x_row = x + row * cols;
    scalar_t* out_row = out + row * cols;
    for (int64_t col = 0; col < cols; ++col) {
      const opmath_t v =
          static_cast<opmath_t>(x_row[col]) * scale + static_cast<opmath_t>(bias[col]);
      // `v < 0 ? 0 : v`, not `v > 0 ? v : 0`: NaN fails every comparison, and torch.relu keeps it.
      out_row[col] = static_cast<scalar_t>(v < opmath_t(0) ? opmath_t(0) : v);
    }
  }
}

// What v2 and v3 share before their loops: contiguous inputs (a copy if they are not: the loop
// indexes raw memory as rows of `cols` elements) and an output of the same shape.
struct Rows {
  at::Tensor x, bias, out;
  int64_t rows = 0, cols = 0;
};

Rows prepare_rows(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  check_fused_bias_relu_inputs(x, bias, op);
  Rows r{x.contiguous(), bias.contiguous(), at::empty_like(x, at::MemoryFormat::Contiguous)};
  r.cols = x.size(-1);
  r.rows = r.cols == 0 ? 0 : x.numel() / r.cols;
  return r;
}

}  // namespace

// v1: what you would write in Python, in C++. Each op reads and writes the whole tensor.
at::Tensor fused_bias_relu_v1_aten(const at::Tensor& x, const at::Tensor& bias, double scale) {
  check_fused_bias_relu_inputs(x, bias, "fused_bias_relu_v1_aten");
  return at::relu(x * scale + bias);
}

// v2: one pass, one thread. AT_DISPATCH_... instantiates the lambda once per dtype, with
// scalar_t set to float, double, at::Half or at::BFloat16, and calls the one matching x.
at::Tensor fused_bias_relu_v2_loop(const at::Tensor& x, const at::Tensor& bias, double scale) {
  Rows r = prepare_rows(x, bias, "fused_bias_relu_v2_loop");
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, r.x.scalar_type(), "fused_bias_relu_v2_loop", [&] {
        fused_bias_relu_rows<scalar_t>(r.x.const_data_ptr<scalar_t>(),
                                       r.bias.const_data_ptr<scalar_t>(),
                                       r.out.data_ptr<scalar_t>(), 0, r.rows, r.cols,
                                       static_cast<at::opmath_type<scalar_t>>(scale));
      });
  return r.out;
}

// v3: v2's loop, rows split across torch's intra-op thread pool (torch.get_num_threads()).
// A chunk gets at least ~32K elements: smaller ones cost more to hand out than to compute.
at::Tensor fused_bias_relu_v3_parallel(const at::Tensor& x, const at::Tensor& bias, double scale) {
  Rows r = prepare_rows(x, bias, "fused_bias_relu_v3_parallel");
  const int64_t grain_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, r.cols));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, r.x.scalar_type(), "fused_bias_relu_v3_parallel", [&] {
        at::parallel_for(0, r.rows, grain_rows, [&](int64_t begin, int64_t end) {
          fused_bias_relu_rows<scalar_t>(r.x.const_data_ptr<scalar_t>(),
                                         r.bias.const_data_ptr<scalar_t>(),
                                         r.out.data_ptr<scalar_t>(), begin, end, r.cols,
                                         static_cast<at::opmath_type<scalar_t>>(scale));
        });
      });
  return r.out;
}

// How many threads at::parallel_for runs `chunks` one-item chunks on. It splits a range only where
// the calling file was compiled with -fopenmp (its OpenMP pragmas are in the header); without
// the flag this returns 1 whatever torch.get_num_threads() says, and so does v3's speed-up.
int64_t parallel_for_thread_count(int64_t chunks) {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  at::parallel_for(0, chunks, /*grain_size=*/1, [&](int64_t, int64_t) {
    const std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  return static_cast<int64_t>(threads.size());
}
