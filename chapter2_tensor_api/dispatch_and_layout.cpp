// dispatch_and_layout.cpp: two lessons about what happens around the arithmetic.
//   1. Dispatch overhead: T small matrix products one call at a time, versus one batched call.
//   2. Row-major versus column-major: a BLAS-style (Fortran-order) GEMM, and how a row-major
//      library such as PyTorch calls it for C = A @ B without a single transpose copy.
// Lesson sections "What a call costs in C++" and "Row-major meets column-major".

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/core/Tensor.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>  // at::mm_out as well

#include "checks.h"

// ---- 1. Dispatch overhead
// ------------------------------------------------------------------------

// out[t] = a[t] @ b[t] for t in [0, T): every iteration goes through the dispatcher four times
// (three select()s and one mm_out), whatever the size of the matrices.
at::Tensor matmul_loop(const at::Tensor& a, const at::Tensor& b) {
  course::check_dim(a, 3, "matmul_loop", "a");
  course::check_dim(b, 3, "matmul_loop", "b");
  course::check_like(a, b, "matmul_loop", "a", "b");
  course::check_size(b, 0, a.size(0), "matmul_loop", "b");
  course::check_size(b, 1, a.size(2), "matmul_loop", "b");
  at::Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  for (int64_t t = 0; t < a.size(0); ++t) {
    at::Tensor out_t = out.select(0, t);
    at::mm_out(out_t, a.select(0, t), b.select(0, t));
  }
  return out;
}

// The same product as one call: one dispatch, and BLAS sees all T problems at once.
at::Tensor matmul_batched(const at::Tensor& a, const at::Tensor& b) {
  course::check_dim(a, 3, "matmul_batched", "a");
  course::check_dim(b, 3, "matmul_batched", "b");
  return at::bmm(a, b);
}

// ---- 2. Row-major versus column-major ---------------------------------------------------------

// C = A * B with every matrix column-major, the interface of BLAS and cuBLAS: element (i, j) of
// an m x n matrix with leading dimension ld lives at [i + j * ld]. A naive triple loop: this is
// about the memory layout, not about speed.
void gemm_column_major(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                       int64_t ldb, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) sum += a[i + p * lda] * b[p + j * ldb];
      c[i + j * ldc] = sum;
    }
  }
}

// C = A @ B for row-major (contiguous) A: (M, K) and B: (K, N), through the column-major GEMM.
// Read as column-major, row-major memory holds the transpose: A's buffer is A^T (K x M), B's is
// B^T (N x K), and C's buffer, read column-major, is C^T (N x M). Since C^T = B^T A^T, we ask
// the column-major GEMM for B^T A^T, passing B's buffer first: it writes C, row-major.
at::Tensor matmul_via_column_major_gemm(const at::Tensor& a, const at::Tensor& b) {
  constexpr const char* op = "matmul_via_column_major_gemm";
  course::check_cpu(a, op, "a");
  course::check_cpu(b, op, "b");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat, op,
              ": a and b must be float32, got ", a.scalar_type(), " and ", b.scalar_type());
  course::check_dim(a, 2, op, "a");
  course::check_dim(b, 2, op, "b");
  course::check_size(b, 0, a.size(1), op, "b");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), op,
              ": a and b must be contiguous (row-major); call .contiguous() first");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  at::Tensor c = at::empty({M, N}, a.options());
  gemm_column_major(/*m=*/N, /*n=*/M, /*k=*/K, b.data_ptr<float>(), /*lda=*/N, a.data_ptr<float>(),
                    /*ldb=*/K, c.data_ptr<float>(), /*ldc=*/N);
  return c;
}
