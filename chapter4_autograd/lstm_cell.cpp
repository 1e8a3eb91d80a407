// lstm_cell.cpp: one LSTM step, forward (chapter 2's, in ATen) and backward (lesson: "The LSTM
// cell backward"). The backward's pointwise part runs as one CUDA kernel on the GPU
// (lstm_cell.cu) and as ATen ops on the CPU; the matrix products are ATen's (cuBLAS, or BLAS).

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/TensorOperators.h>  // f * c + i * g, ...
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros_like.h>

#include <tuple>
#include <utility>
#include <vector>

#include "checks.h"
#include "cuda_ops.h"
#include "ops.h"

namespace {

void check_lstm_inputs(const at::Tensor& x, const at::Tensor& h, const at::Tensor& c,
                       const at::Tensor& w_ih, const at::Tensor& w_hh, const char* op) {
  course::check_floating(x, op, "x");
  const std::pair<const at::Tensor*, const char*> others[] = {
      {&h, "h"}, {&c, "c"}, {&w_ih, "w_ih"}, {&w_hh, "w_hh"}};
  for (const auto& [t, name] : others) course::check_like(x, *t, op, "x", name);
  TORCH_CHECK(x.dim() == 2 && h.dim() == 2, op, ": x and h must be 2-D (batch, features), got ",
              x.sizes(), " and ", h.sizes());
  const int64_t batch = x.size(0), input_size = x.size(1), hidden = h.size(1);
  TORCH_CHECK(h.size(0) == batch, op, ": h must have ", batch, " rows like x, got ", h.size(0));
  course::check_same_shape(h, c, op, "h", "c");
  TORCH_CHECK(w_ih.sizes() == at::IntArrayRef({4 * hidden, input_size}), op,
              ": w_ih must have shape [", 4 * hidden, ", ", input_size, "], got ", w_ih.sizes());
  TORCH_CHECK(w_hh.sizes() == at::IntArrayRef({4 * hidden, hidden}), op, ": w_hh must have shape [",
              4 * hidden, ", ", hidden, "], got ", w_hh.sizes());
}

// The pointwise backward in ATen, for the CPU: the same formulas as lstm_cell.cu.
std::tuple<at::Tensor, at::Tensor> lstm_gates_backward_cpu(const at::Tensor& grad_h,
                                                           const at::Tensor& grad_c,
                                                           const at::Tensor& c,
                                                           const at::Tensor& gates,
                                                           const at::Tensor& tanh_c) {
  const auto g = gates.chunk(4, /*dim=*/1);
  const at::Tensor &i = g[0], &f = g[1], &cand = g[2], &o = g[3];
  const at::Tensor dc = grad_c + grad_h * o * (1 - tanh_c * tanh_c);
  at::Tensor grad_gates = at::cat({dc * cand * i * (1 - i), dc * c * f * (1 - f),
                                   dc * i * (1 - cand * cand), grad_h * tanh_c * o * (1 - o)},
                                  /*dim=*/1);
  return {grad_gates, dc * f};
}

}  // namespace

std::vector<at::Tensor> lstm_cell_forward(const at::Tensor& x, const at::Tensor& h,
                                          const at::Tensor& c, const at::Tensor& w_ih,
                                          const at::Tensor& w_hh, const at::Tensor& b_ih,
                                          const at::Tensor& b_hh) {
  const char* op = "lstm_cell_forward";
  check_lstm_inputs(x, h, c, w_ih, w_hh, op);
  course::check_like(x, b_ih, op, "x", "b_ih");
  course::check_like(x, b_hh, op, "x", "b_hh");
  const int64_t hidden = h.size(1);
  TORCH_CHECK(b_ih.sizes() == at::IntArrayRef({4 * hidden}) && b_hh.sizes() == b_ih.sizes(), op,
              ": b_ih and b_hh must have shape [", 4 * hidden, "], got ", b_ih.sizes(), " and ",
              b_hh.sizes());
  at::Tensor gates = at::addmm(b_ih + b_hh, x, w_ih.t());
  gates.addmm_(h, w_hh.t());
  const auto chunks = gates.chunk(4, /*dim=*/1);
  const at::Tensor i = at::sigmoid(chunks[0]), f = at::sigmoid(chunks[1]);
  const at::Tensor g = at::tanh(chunks[2]), o = at::sigmoid(chunks[3]);
  at::Tensor c_next = f * c + i * g;
  at::Tensor tanh_c_next = at::tanh(c_next);
  return {o * tanh_c_next, c_next, at::cat({i, f, g, o}, /*dim=*/1), tanh_c_next};
}

std::vector<at::Tensor> lstm_cell_backward(const at::Tensor& grad_h_next,
                                           const at::Tensor& grad_c_next, const at::Tensor& x,
                                           const at::Tensor& h, const at::Tensor& c,
                                           const at::Tensor& w_ih, const at::Tensor& w_hh,
                                           const at::Tensor& gates, const at::Tensor& tanh_c_next,
                                           const std::vector<bool>& needs) {
  const char* op = "lstm_cell_backward";
  check_lstm_inputs(x, h, c, w_ih, w_hh, op);
  TORCH_CHECK(needs.size() == 6, op, ": needs must have 6 flags (x, h, c, w_ih, w_hh, bias), got ",
              needs.size());
  // An output that reached no loss has no gradient: it counts as zero.
  const at::Tensor grad_h = grad_h_next.defined() ? grad_h_next : at::zeros_like(h);
  const at::Tensor grad_c = grad_c_next.defined() ? grad_c_next : at::zeros_like(c);
  course::check_like(c, grad_h, op, "c", "grad_h");
  course::check_like(c, grad_c, op, "c", "grad_c");
  course::check_same_shape(c, grad_h, op, "c", "grad_h");
  course::check_same_shape(c, grad_c, op, "c", "grad_c");
  // gates and tanh_c_next come from lstm_cell_forward; a caller could still pass anything, and
  // the CUDA kernel indexes them by c's shape.
  const int64_t batch = c.size(0), hidden = c.size(1);
  course::check_like(c, gates, op, "c", "gates");
  course::check_like(c, tanh_c_next, op, "c", "tanh_c_next");
  TORCH_CHECK(gates.sizes() == at::IntArrayRef({batch, 4 * hidden}), op,
              ": gates must have shape [", batch, ", ", 4 * hidden, "], got ", gates.sizes());
  course::check_same_shape(c, tanh_c_next, op, "c", "tanh_c_next");

  at::Tensor grad_gates, grad_c_prev;
  if (c.is_cuda()) {
#ifdef WITH_CUDA
    std::tie(grad_gates, grad_c_prev) =
        cuda_ops::lstm_gates_backward(grad_h, grad_c, c, gates, tanh_c_next);
#else
    TORCH_CHECK(false, op, ": got CUDA tensors, but this module was built without CUDA");
#endif
  } else {
    std::tie(grad_gates, grad_c_prev) =
        lstm_gates_backward_cpu(grad_h, grad_c, c, gates, tanh_c_next);
  }
  // gates = x W_ih^T + h W_hh^T + b: the products' gradients, each only when asked for.
  return {
      needs[0] ? grad_gates.mm(w_ih) : at::Tensor(),
      needs[1] ? grad_gates.mm(w_hh) : at::Tensor(),
      needs[2] ? grad_c_prev : at::Tensor(),
      needs[3] ? grad_gates.t().mm(x) : at::Tensor(),
      needs[4] ? grad_gates.t().mm(h) : at::Tensor(),
      needs[5] ? grad_gates.sum(0) : at::Tensor(),
  };
}
