// lstm_cell.cpp: one LSTM step and its backward (chapters 2 and 4), for the CPU and CUDA. The
// matrix products are ATen's (BLAS or cuBLAS) on both; the pointwise parts are ATen ops on the
// CPU and one fused kernel each way on CUDA (csrc/cuda/lstm_cell.cu), where chapter 4 fused
// only the backward's. On CUDA a step launches two products and one kernel forward (here the
// second product accumulates into the first; torch.nn.LSTMCell's fused cell kernel adds the two),
// and one kernel, a column sum and the products of the gradients asked for backward.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <torch/library.h>

#include <array>

#include "checks.h"
#include "lstm_cell.h"

namespace custom_ops {
namespace {

void check_lstm(const at::Tensor& x, const at::Tensor& h, const at::Tensor& c,
                const at::Tensor& w_ih, const at::Tensor& w_hh, const char* op) {
  check_floating(x, op, "x");
  const std::pair<const at::Tensor*, const char*> all[] = {
      {&x, "x"}, {&h, "h"}, {&c, "c"}, {&w_ih, "w_ih"}, {&w_hh, "w_hh"}};
  for (const auto& [t, name] : all) {
    check_like(x, *t, op, "x", name);
  }
  TORCH_CHECK(x.dim() == 2 && h.dim() == 2, op, ": x and h must be 2-D (batch, features), got ",
              x.sizes(), " and ", h.sizes());
  const int64_t batch = x.size(0), input_size = x.size(1), hidden = h.size(1);
  TORCH_CHECK(h.size(0) == batch, op, ": h must have ", batch, " rows like x, got ", h.size(0));
  check_same_shape(h, c, op, "h", "c");
  TORCH_CHECK(w_ih.sizes() == at::IntArrayRef({4 * hidden, input_size}), op,
              ": w_ih must have shape [", 4 * hidden, ", ", input_size, "], got ", w_ih.sizes());
  TORCH_CHECK(w_hh.sizes() == at::IntArrayRef({4 * hidden, hidden}), op, ": w_hh must have shape [",
              4 * hidden, ", ", hidden, "], got ", w_hh.sizes());
}

}  // namespace

// -> h_next, c_next, the activated gates [i f g o] (B, 4H) and tanh(c_next): the last two are
// what the backward needs.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstm_cell(
    const at::Tensor& x, const at::Tensor& h, const at::Tensor& c_in, const at::Tensor& w_ih,
    const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh,
    LstmPointwiseForward fused) {
  const char* op = "lstm_cell";
  check_lstm(x, h, c_in, w_ih, w_hh, op);
  // The products take any strides; the pointwise kernel reads c as contiguous rows (checks.h).
  const at::Tensor c = c_in.contiguous();
  check_like(x, b_ih, op, "x", "b_ih");
  check_like(x, b_hh, op, "x", "b_hh");
  const int64_t hidden = h.size(1);
  TORCH_CHECK(b_ih.sizes() == at::IntArrayRef({4 * hidden}) && b_hh.sizes() == b_ih.sizes(), op,
              ": b_ih and b_hh must have shape [", 4 * hidden, "], got ", b_ih.sizes(), " and ",
              b_hh.sizes());
  // The second product accumulates into the first (beta = 1), and the biases are left to the
  // pointwise pass: no kernel adds b_ih + b_hh, and no copy broadcasts them into `pre` first.
  at::Tensor pre = at::mm(x, w_ih.t());
  pre.addmm_(h, w_hh.t());
  if (fused != nullptr) return fused(pre, b_ih.contiguous(), b_hh.contiguous(), c);
  // In float for the half types, rounded once at the end, as the CUDA kernel does.
  const auto acc = opmath_dtype(x);
  const auto chunks = (pre.to(acc) + b_ih.to(acc) + b_hh.to(acc)).chunk(4, /*dim=*/1);
  const at::Tensor i = at::sigmoid(chunks[0]), f = at::sigmoid(chunks[1]);
  const at::Tensor g = at::tanh(chunks[2]), o = at::sigmoid(chunks[3]);
  const at::Tensor c_next = f * c.to(acc) + i * g;
  const at::Tensor tanh_c = at::tanh(c_next);
  const auto out = x.scalar_type();
  return {(o * tanh_c).to(out), c_next.to(out), at::cat({i, f, g, o}, /*dim=*/1).to(out),
          tanh_c.to(out)};
}

// -> the gradients of x, h, c, w_ih, w_hh and of the bias (the same for b_ih and b_hh); one whose
// output_mask entry is false is not computed and comes back undefined (None in Python), as from
// ATen's convolution_backward.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
lstm_cell_backward(const at::Tensor& grad_h, const at::Tensor& grad_c, const at::Tensor& x,
                   const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
                   const at::Tensor& w_hh, const at::Tensor& gates, const at::Tensor& tanh_c,
                   std::array<bool, 6> output_mask, LstmPointwiseBackward fused) {
  const char* op = "lstm_cell_backward";
  check_lstm(x, h, c, w_ih, w_hh, op);
  const std::pair<const at::Tensor*, const char*> same_as_c[] = {
      {&grad_h, "grad_h"}, {&grad_c, "grad_c"}, {&tanh_c, "tanh_c"}};
  for (const auto& [t, name] : same_as_c) {
    check_like(c, *t, op, "c", name);
    check_same_shape(c, *t, op, "c", name);
  }
  check_like(c, gates, op, "c", "gates");
  TORCH_CHECK(gates.sizes() == at::IntArrayRef({c.size(0), 4 * c.size(1)}), op,
              ": gates must have shape [", c.size(0), ", ", 4 * c.size(1), "], got ",
              gates.sizes());

  at::Tensor grad_pre, grad_c_prev;
  if (fused != nullptr) {
    // The kernel reads what the forward made as contiguous rows, and the two gradients through
    // their strides: autograd often hands them over as views (the expanded ones of a loss
    // h.sum(), the zeros standing for an output that was not used), and a copy would cost a
    // kernel each.
    std::tie(grad_pre, grad_c_prev) =
        fused(grad_h, grad_c, c.contiguous(), gates.contiguous(), tanh_c.contiguous());
  } else {
    const auto acc = opmath_dtype(c);  // in float for the half types, as on CUDA
    const auto g = gates.to(acc).chunk(4, /*dim=*/1);
    const at::Tensor &i = g[0], &f = g[1], &cand = g[2], &o = g[3];
    const at::Tensor tc = tanh_c.to(acc), gh = grad_h.to(acc);
    const at::Tensor dc = grad_c.to(acc) + gh * o * (1 - tc * tc);
    grad_pre = at::cat({dc * cand * i * (1 - i), dc * c.to(acc) * f * (1 - f),
                        dc * i * (1 - cand * cand), gh * tc * o * (1 - o)},
                       /*dim=*/1)
                   .to(c.scalar_type());
    grad_c_prev = (dc * f).to(c.scalar_type());
  }
  // pre = x W_ih^T + h W_hh^T + b_ih + b_hh: four products and a column sum, one for each
  // gradient. Autograd skips the products of an nn.LSTMCell input that needs no gradient (the
  // state, in a loop that starts from zeros; the weights, frozen): so does the mask.
  at::Tensor grad_x, grad_h_prev, grad_w_ih, grad_w_hh, grad_bias;
  if (output_mask[0]) grad_x = grad_pre.mm(w_ih);
  if (output_mask[1]) grad_h_prev = grad_pre.mm(w_hh);
  if (!output_mask[2]) grad_c_prev = at::Tensor();
  if (output_mask[3]) grad_w_ih = grad_pre.t().mm(x);
  if (output_mask[4]) grad_w_hh = grad_pre.t().mm(h);
  if (output_mask[5]) grad_bias = grad_pre.sum(0);
  return {grad_x, grad_h_prev, grad_c_prev, grad_w_ih, grad_w_hh, grad_bias};
}

namespace {

// One host function serves both devices: the products dispatch on their own, and the pointwise
// part is ATen's ops here, on the CPU, and the fused kernels that csrc/cuda/lstm_cell.cu passes
// in its own registration, on CUDA.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstm_cell_cpu(
    const at::Tensor& x, const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
    const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh) {
  return lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, /*fused=*/nullptr);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
lstm_cell_backward_cpu(const at::Tensor& grad_h, const at::Tensor& grad_c, const at::Tensor& x,
                       const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
                       const at::Tensor& w_hh, const at::Tensor& gates, const at::Tensor& tanh_c,
                       std::array<bool, 6> output_mask) {
  return lstm_cell_backward(grad_h, grad_c, x, h, c, w_ih, w_hh, gates, tanh_c, output_mask,
                            /*fused=*/nullptr);
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) {
  m.impl("lstm_cell", &lstm_cell_cpu);
  m.impl("lstm_cell_backward", &lstm_cell_backward_cpu);
}

}  // namespace custom_ops
