// lstm.h: what the CPU (csrc/lstm.cpp) and CUDA (csrc/cuda/lstm.cu) versions of custom_ops::lstm
// share: the input checks, run before any work on either device, and the names of the sizes.
//
// One layer, one direction, time-major: x (T, B, I), h0 and c0 (B, H), w_ih (4H, I), w_hh (4H, H),
// b_ih and b_hh (4H,), the gates in torch.nn.LSTM's order i, f, g, o. The forward returns
// y (T, B, H), h_n and c_n (B, H), and two tensors for the backward: the activated gates
// (T, B, 4H) in x's dtype, and the cell states c_0 .. c_T (T + 1, B, H) in the compute dtype
// (float for the half types): c is summed over every step and must not be rounded each time.
// The backward's gradient of the gates is rounded to x's dtype on CUDA (an operand of cuBLAS's
// products) and kept in float on the CPU, so half-type gradients differ between the two a little.
#pragma once

#include <tuple>
#include <vector>

#include "checks.h"

namespace custom_ops {

// lstm's outputs (y, h_n, c_n, gates, cs) and lstm_backward's (the gradients of x, h0, c0, w_ih,
// w_hh and of the bias, the same for b_ih and b_hh).
using LstmOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using LstmGrads =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// A new tensor of `dtype` holding t: never t itself, so no output aliases an input or another
// output (PyTorch's rule for operators; opcheck tests it).
inline at::Tensor fresh(const at::Tensor& t, at::ScalarType dtype) {
  return t.to(dtype, /*non_blocking=*/false, /*copy=*/true, at::MemoryFormat::Contiguous);
}

struct LstmSizes {
  int64_t steps, batch, input, hidden;  // T, B, I, H
};

// x, h0 and the weights, which the forward and the backward both take.
inline LstmSizes check_lstm_weights(const at::Tensor& x, const at::Tensor& h0,
                                    const at::Tensor& w_ih, const at::Tensor& w_hh,
                                    const char* op) {
  check_floating(x, op, "x");
  const std::pair<const at::Tensor*, const char*> all[] = {
      {&h0, "h0"}, {&w_ih, "w_ih"}, {&w_hh, "w_hh"}};
  for (const auto& [t, name] : all) check_like(x, *t, op, "x", name);
  TORCH_CHECK(x.dim() == 3, op, ": x must be 3-D (time, batch, features), got shape ", x.sizes());
  TORCH_CHECK(w_hh.dim() == 2 && w_hh.size(0) == 4 * w_hh.size(1), op,
              ": w_hh must have shape [4 * hidden, hidden], got ", w_hh.sizes());
  const LstmSizes s{x.size(0), x.size(1), x.size(2), w_hh.size(1)};
  TORCH_CHECK(s.input > 0 && s.hidden > 0, op,
              ": input_size and hidden_size must be positive, got ", s.input, " and ", s.hidden);
  TORCH_CHECK(w_ih.dim() == 2 && w_ih.size(0) == 4 * s.hidden, op, ": w_ih must have shape [",
              4 * s.hidden, ", input_size] to match w_hh, got ", w_ih.sizes());
  TORCH_CHECK(w_ih.size(1) == s.input, op, ": x has ", s.input, " features but w_ih expects ",
              w_ih.size(1), " (w_ih has shape ", w_ih.sizes(), ")");
  TORCH_CHECK(h0.sizes() == at::IntArrayRef({s.batch, s.hidden}), op, ": h0 must have shape [",
              s.batch, ", ", s.hidden, "] (batch, hidden), got ", h0.sizes());
  return s;
}

inline LstmSizes check_lstm_inputs(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0,
                                   const at::Tensor& w_ih, const at::Tensor& w_hh,
                                   const at::Tensor& b_ih, const at::Tensor& b_hh, const char* op) {
  const LstmSizes s = check_lstm_weights(x, h0, w_ih, w_hh, op);
  const std::pair<const at::Tensor*, const char*> rest[] = {
      {&c0, "c0"}, {&b_ih, "b_ih"}, {&b_hh, "b_hh"}};
  for (const auto& [t, name] : rest) check_like(x, *t, op, "x", name);
  // Vectors, not IntArrayRef{...}: an ArrayRef made from a braced list points into a temporary,
  // fine inside one expression (as in the checks above) but dangling once stored in a variable.
  const std::vector<int64_t> state{s.batch, s.hidden};
  TORCH_CHECK(c0.sizes() == state, op, ": c0 must have shape [", s.batch, ", ", s.hidden,
              "] (batch, hidden), got ", c0.sizes());
  TORCH_CHECK(b_ih.sizes() == at::IntArrayRef({4 * s.hidden}), op, ": b_ih must have shape [",
              4 * s.hidden, "], got ", b_ih.sizes());
  TORCH_CHECK(b_hh.sizes() == at::IntArrayRef({4 * s.hidden}), op, ": b_hh must have shape [",
              4 * s.hidden, "], got ", b_hh.sizes());
  return s;
}

// The backward's inputs, beyond those the forward checked: gradients shaped like the outputs, and
// the saved tensors as the forward made them.
inline LstmSizes check_lstm_backward_inputs(const at::Tensor& grad_y, const at::Tensor& grad_hn,
                                            const at::Tensor& grad_cn, const at::Tensor& x,
                                            const at::Tensor& h0, const at::Tensor& w_ih,
                                            const at::Tensor& w_hh, const at::Tensor& y,
                                            const at::Tensor& gates, const at::Tensor& cs) {
  const char* op = "lstm_backward";
  const LstmSizes s = check_lstm_weights(x, h0, w_ih, w_hh, op);
  const std::pair<const at::Tensor*, const char*> like_x[] = {
      {&grad_y, "grad_y"}, {&grad_hn, "grad_hn"}, {&grad_cn, "grad_cn"}, {&y, "y"}};
  for (const auto& [t, name] : like_x) check_like(x, *t, op, "x", name);
  const std::vector<int64_t> seq{s.steps, s.batch, s.hidden}, state{s.batch, s.hidden};
  TORCH_CHECK(grad_y.sizes() == seq && y.sizes() == seq, op, ": grad_y and y must have shape ",
              at::IntArrayRef(seq), ", got ", grad_y.sizes(), " and ", y.sizes());
  TORCH_CHECK(grad_hn.sizes() == state && grad_cn.sizes() == state, op,
              ": grad_hn and grad_cn must have shape ", at::IntArrayRef(state), ", got ",
              grad_hn.sizes(), " and ", grad_cn.sizes());
  const auto acc = opmath_dtype(x);
  TORCH_CHECK(gates.scalar_type() == x.scalar_type() && cs.scalar_type() == acc, op,
              ": gates must be ", x.scalar_type(), " and cs ", acc, " (what lstm saved), got ",
              gates.scalar_type(), " and ", cs.scalar_type());
  TORCH_CHECK(gates.sizes() == at::IntArrayRef({s.steps, s.batch, 4 * s.hidden}), op,
              ": gates must have shape [", s.steps, ", ", s.batch, ", ", 4 * s.hidden, "], got ",
              gates.sizes());
  TORCH_CHECK(cs.sizes() == at::IntArrayRef({s.steps + 1, s.batch, s.hidden}), op,
              ": cs must have shape [", s.steps + 1, ", ", s.batch, ", ", s.hidden, "], got ",
              cs.sizes());
  TORCH_CHECK(gates.device() == x.device() && cs.device() == x.device(), op,
              ": gates and cs must be on ", x.device());
  return s;
}

}  // namespace custom_ops
