// lstm_cell.cpp: one step of an LSTM cell, forward, composed from ATen ops. It matches
// torch.nn.LSTMCell (gate order i, f, g, o) and also returns what chapter 4's backward needs.
// Equations and reference in the lesson ("An LSTM cell in ATen").

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/TensorOperators.h>  // forget_gate * c + ...
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>

#include <utility>
#include <vector>

#include "checks.h"

// Returns {h_next, c_next, gates, tanh_c_next}: gates is (batch, 4 * hidden), the activated
// i, f, g, o side by side; saving them (and tanh(c_next)) spares the backward pass recomputing.
std::vector<at::Tensor> lstm_cell_forward(const at::Tensor& x, const at::Tensor& h,
                                          const at::Tensor& c, const at::Tensor& w_ih,
                                          const at::Tensor& w_hh, const at::Tensor& b_ih,
                                          const at::Tensor& b_hh) {
  constexpr const char* op = "lstm_cell_forward";
  course::check_floating(x, op, "x");
  const std::pair<const at::Tensor*, const char*> others[] = {
      {&h, "h"}, {&c, "c"}, {&w_ih, "w_ih"}, {&w_hh, "w_hh"}, {&b_ih, "b_ih"}, {&b_hh, "b_hh"}};
  for (const auto& [t, name] : others) {
    course::check_like(x, *t, op, "x", name);
  }
  course::check_dim(x, 2, op, "x");
  course::check_dim(h, 2, op, "h");
  course::check_dim(w_ih, 2, op, "w_ih");
  const int64_t batch = x.size(0), input_size = x.size(1), hidden = h.size(1);
  course::check_size(h, 0, batch, op, "h");
  TORCH_CHECK(c.sizes() == h.sizes(), op, ": c must have h's shape ", h.sizes(), ", got ",
              c.sizes());
  TORCH_CHECK(w_ih.sizes() == at::IntArrayRef({4 * hidden, input_size}), op,
              ": w_ih must have shape [", 4 * hidden, ", ", input_size, "], got ", w_ih.sizes());
  TORCH_CHECK(w_hh.sizes() == at::IntArrayRef({4 * hidden, hidden}), op, ": w_hh must have shape [",
              4 * hidden, ", ", hidden, "], got ", w_hh.sizes());
  TORCH_CHECK(b_ih.sizes() == at::IntArrayRef({4 * hidden}) && b_hh.sizes() == b_ih.sizes(), op,
              ": b_ih and b_hh must have shape [", 4 * hidden, "], got ", b_ih.sizes(), " and ",
              b_hh.sizes());

  // gates = x @ w_ih^T + h @ w_hh^T + b_ih + b_hh: two GEMMs accumulating into one buffer.
  // addmm computes beta * input + alpha * (mat1 @ mat2) in one BLAS call.
  at::Tensor gates = at::addmm(b_ih + b_hh, x, w_ih.t());
  gates.addmm_(h, w_hh.t());

  const auto chunks = gates.chunk(4, /*dim=*/1);
  const at::Tensor input_gate = at::sigmoid(chunks[0]);
  const at::Tensor forget_gate = at::sigmoid(chunks[1]);
  const at::Tensor cell_candidate = at::tanh(chunks[2]);
  const at::Tensor output_gate = at::sigmoid(chunks[3]);

  at::Tensor c_next = forget_gate * c + input_gate * cell_candidate;
  at::Tensor tanh_c_next = at::tanh(c_next);
  at::Tensor h_next = output_gate * tanh_c_next;
  at::Tensor activated = at::cat({input_gate, forget_gate, cell_candidate, output_gate}, /*dim=*/1);
  return {h_next, c_next, activated, tanh_c_next};
}
