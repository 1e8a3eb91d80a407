// lstm.h: what the CPU (csrc/lstm.cpp) and CUDA (csrc/cuda/lstm.cu) versions of custom_ops::lstm
// and custom_ops::lstm_packed (its section at the end) share: the input checks, run before any
// work on either device, and the names of the sizes.
//
// One layer, one direction, time-major: x (T, B, I), h0 and c0 (B, H), w_ih (4H, I), w_hh (4H, H),
// b_ih and b_hh (4H,), the gates in torch.nn.LSTM's order i, f, g, o. The forward returns
// y (T, B, H), h_n and c_n (B, H), and two tensors for the backward: the activated gates
// (T, B, 4H) in x's dtype, and the cell states c_0 .. c_T (T + 1, B, H) in the compute dtype
// (float for the half types): c is summed over every step and must not be rounded each time.
// The backward's gradient of the gates is rounded to x's dtype on CUDA (an operand of cuBLAS's
// products) and kept in float on the CPU, so half-type gradients differ between the two a little.
#pragma once

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
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

// Which paths custom_ops::lstm may take on CUDA (csrc/cuda/lstm.cu), as custom_ops.lstm_paths
// sets them (the op custom_ops::_lstm_paths); the CPU has one path and ignores them. Read by every
// CUDA call, set rarely (tests, benchmarks): atomics, so no call sees half a change.
//   persistent   "auto": the one-launch kernel where lstm_persistent.cu measured it faster;
//                "always": wherever it fits; "never". CUSTOM_OPS_LSTM_PERSISTENT=1 / 0 in the
//                environment when the library loads starts at "always" / "never".
//   step_graphs  "auto": the step loop replayed from a CUDA graph where its launches cost more
//                than its kernels, from a shape's second call on; "always": from the first call,
//                at any size; "never".
//   tensor_cores the float16/bfloat16 persistent forward on tensor cores (lstm_persistent_tc.cu):
//                "auto": wherever `persistent` would run a persistent kernel and it fits;
//                "always": wherever it fits, whatever `persistent` says; "never".
//   clusters     within the tensor-core forward, the variant whose blocks form one thread-block
//                cluster and pass h_t through distributed shared memory (H100 and newer, H <= 512,
//                B <= 32): "auto": where it measured faster (B <= 8, or 16 at H <= 256);
//                "always": wherever it fits; "never".
enum class PathChoice { kAuto, kAlways, kNever };
struct LstmPaths {
  std::atomic<PathChoice> persistent{PathChoice::kAuto};
  std::atomic<PathChoice> step_graphs{PathChoice::kAuto};
  std::atomic<PathChoice> tensor_cores{PathChoice::kAuto};
  std::atomic<PathChoice> clusters{PathChoice::kAuto};
};
LstmPaths& lstm_paths();  // the one instance, in lstm.cpp
// custom_ops::_lstm_paths(persistent, step_graphs, tensor_cores, clusters): sets what is not ""
// and returns the settings as they were, so that a caller can put them back.
std::vector<std::string> set_lstm_paths(std::string persistent, std::string step_graphs,
                                        std::string tensor_cores, std::string clusters);

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

// ---- lstm_packed: one direction of a layer over a packed batch, optionally projected -----------
//
// The layout of torch.nn.utils.rnn.PackedSequence: x (N, I) holds the rows of step 0, then those
// of step 1, ..., and batch_sizes (T,) (int64, on the CPU) says how many rows each step has. The
// sequences are sorted longest first, so a step's rows are the first batch_sizes[t] rows of the
// step before: the batch shrinks as sequences end, and no row is padding. A padded (T, B, I)
// tensor is the case batch_sizes = [B] * T. `reverse` runs the steps from the last to the first
// (a bidirectional layer's second direction): a sequence then starts at its own last step, from
// h0 and c0. With w_hr (P, H) defined, h_t = (o * tanh(c_t)) W_hr^T is of size P (torch.nn.LSTM's
// proj_size), and w_hh is (4H, P). The forward returns y (N, P), h_n (B, P), c_n (B, H), and for
// the backward the activated gates (N, 4H) in x's dtype, each row's c (N, H) in the compute dtype,
// r = o * tanh(c) (N, H) in x's dtype when projected (else an empty (0, H) tensor), and the h each
// row's step started from (N, P), which the gradient of w_hh multiplies.
using LstmPackedOut =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
// The gradients of x, h0, c0, w_ih, w_hh, the bias (the same for b_ih and b_hh), and w_hr (an
// empty tensor when there is none).
using LstmPackedGrads =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

struct LstmPackedSizes {
  int64_t rows, steps, batch, input, hidden, out;  // N, T, B, I, H, P (P = H without w_hr)
  std::vector<int64_t> batch_sizes, offsets;       // per step: its rows, and where they start
  // The k-th step to run: t = k, or T - 1 - k in reverse.
  int64_t step(int64_t k, bool reverse) const { return reverse ? steps - 1 - k : k; }
};

inline LstmPackedSizes check_lstm_packed_inputs(const at::Tensor& x, const at::Tensor& batch_sizes,
                                                const at::Tensor& h0, const at::Tensor& c0,
                                                const at::Tensor& w_ih, const at::Tensor& w_hh,
                                                const std::optional<at::Tensor>& w_hr,
                                                const char* op) {
  check_floating(x, op, "x");
  const std::pair<const at::Tensor*, const char*> all[] = {
      {&h0, "h0"}, {&c0, "c0"}, {&w_ih, "w_ih"}, {&w_hh, "w_hh"}};
  for (const auto& [t, name] : all) check_like(x, *t, op, "x", name);
  TORCH_CHECK(x.dim() == 2, op, ": x must be 2-D (rows of all steps, features), got shape ",
              x.sizes());
  TORCH_CHECK(batch_sizes.dim() == 1 && batch_sizes.scalar_type() == at::kLong &&
                  batch_sizes.device().is_cpu(),
              op,
              ": batch_sizes must be a 1-D int64 tensor on the CPU (as a PackedSequence holds "
              "it), got ",
              batch_sizes.scalar_type(), " of shape ", batch_sizes.sizes(), " on ",
              batch_sizes.device());
  TORCH_CHECK(w_ih.dim() == 2 && w_ih.size(0) % 4 == 0 && w_ih.size(0) > 0, op,
              ": w_ih must have shape [4 * hidden, input_size], got ", w_ih.sizes());
  LstmPackedSizes s{x.size(0),
                    batch_sizes.size(0),
                    h0.dim() == 2 ? h0.size(0) : -1,
                    x.size(1),
                    w_ih.size(0) / 4,
                    w_ih.size(0) / 4,
                    {},
                    {}};
  if (w_hr.has_value()) {
    check_like(x, *w_hr, op, "x", "w_hr");
    TORCH_CHECK(w_hr->dim() == 2 && w_hr->size(1) == s.hidden, op,
                ": w_hr must have shape [proj_size, ", s.hidden, "], got ", w_hr->sizes());
    // nn.LSTM's rule, and the kernels': h has fewer features than c.
    TORCH_CHECK(w_hr->size(0) > 0 && w_hr->size(0) < s.hidden, op,
                ": proj_size (w_hr's rows) must be between 1 and hidden - 1 = ", s.hidden - 1,
                ", got ", w_hr->size(0));
    s.out = w_hr->size(0);
  }
  TORCH_CHECK(w_ih.size(1) == s.input, op, ": x has ", s.input, " features but w_ih expects ",
              w_ih.size(1), " (w_ih has shape ", w_ih.sizes(), ")");
  TORCH_CHECK(w_hh.sizes() == at::IntArrayRef({4 * s.hidden, s.out}), op,
              ": w_hh must have shape [", 4 * s.hidden, ", ", s.out, "], got ", w_hh.sizes());
  TORCH_CHECK(h0.dim() == 2 && h0.size(1) == s.out, op, ": h0 must have shape [batch, ", s.out,
              "], got ", h0.sizes());
  TORCH_CHECK(c0.sizes() == at::IntArrayRef({s.batch, s.hidden}), op, ": c0 must have shape [",
              s.batch, ", ", s.hidden, "] (batch, hidden), got ", c0.sizes());
  const at::Tensor sizes = batch_sizes.contiguous();
  const int64_t* b = sizes.const_data_ptr<int64_t>();
  int64_t total = 0;
  for (int64_t t = 0; t < s.steps; ++t) {
    if (t == 0) {
      TORCH_CHECK(b[0] == s.batch, op, ": batch_sizes[0] must equal the batch size of h0 (",
                  s.batch, "), got ", b[0]);
    } else {
      // Sizes of 0 are let through for an empty batch (B = 0); a PackedSequence has none.
      TORCH_CHECK(b[t] >= 0 && b[t] <= b[t - 1], op,
                  ": batch_sizes must never grow (the sequences sorted longest first, as "
                  "pack_padded_sequence sorts them), got batch_sizes[",
                  t, "] = ", b[t], " after ", b[t - 1]);
    }
    s.batch_sizes.push_back(b[t]);
    s.offsets.push_back(total);
    total += b[t];
  }
  TORCH_CHECK(total == s.rows, op, ": batch_sizes add up to ", total, " rows but x has ", s.rows);
  return s;
}

inline void check_lstm_bias(const at::Tensor& x, const at::Tensor& b_ih, const at::Tensor& b_hh,
                            int64_t hidden, const char* op) {
  check_like(x, b_ih, op, "x", "b_ih");
  check_like(x, b_hh, op, "x", "b_hh");
  TORCH_CHECK(b_ih.sizes() == at::IntArrayRef({4 * hidden}) &&
                  b_hh.sizes() == at::IntArrayRef({4 * hidden}),
              op, ": b_ih and b_hh must have shape [", 4 * hidden, "], got ", b_ih.sizes(), " and ",
              b_hh.sizes());
}

// The backward's gradients and the tensors the forward saved, as lstm_packed made them.
inline void check_lstm_packed_saved(const LstmPackedSizes& s, const at::Tensor& x,
                                    const at::Tensor& grad_y, const at::Tensor& grad_hn,
                                    const at::Tensor& grad_cn, const at::Tensor& gates,
                                    const at::Tensor& cs, const at::Tensor& r,
                                    const at::Tensor& h_prev, bool projected, const char* op) {
  const std::pair<const at::Tensor*, const char*> like_x[] = {
      {&grad_y, "grad_y"}, {&grad_hn, "grad_hn"}, {&grad_cn, "grad_cn"}, {&gates, "gates"},
      {&r, "r"},           {&h_prev, "h_prev"}};
  for (const auto& [t, name] : like_x) check_like(x, *t, op, "x", name);
  const std::vector<int64_t> out{s.rows, s.out}, h_state{s.batch, s.out},
      c_state{s.batch, s.hidden};
  TORCH_CHECK(grad_y.sizes() == out && h_prev.sizes() == out, op,
              ": grad_y and h_prev must have shape ", at::IntArrayRef(out), ", got ",
              grad_y.sizes(), " and ", h_prev.sizes());
  TORCH_CHECK(grad_hn.sizes() == h_state && grad_cn.sizes() == c_state, op,
              ": grad_hn and grad_cn must have shapes ", at::IntArrayRef(h_state), " and ",
              at::IntArrayRef(c_state), ", got ", grad_hn.sizes(), " and ", grad_cn.sizes());
  TORCH_CHECK(gates.sizes() == at::IntArrayRef({s.rows, 4 * s.hidden}), op,
              ": gates must have shape [", s.rows, ", ", 4 * s.hidden, "], got ", gates.sizes());
  TORCH_CHECK(cs.scalar_type() == opmath_dtype(x) && cs.device() == x.device() &&
                  cs.sizes() == at::IntArrayRef({s.rows, s.hidden}),
              op, ": cs must be ", opmath_dtype(x), " of shape [", s.rows, ", ", s.hidden, "] on ",
              x.device(), " (what lstm_packed saved), got ", cs.scalar_type(), " ", cs.sizes(),
              " on ", cs.device());
  TORCH_CHECK(r.sizes() == at::IntArrayRef({projected ? s.rows : 0, s.hidden}), op,
              ": r must have shape [", projected ? s.rows : 0, ", ", s.hidden, "], got ",
              r.sizes());
}

// Where the rows of the step before step k (in the order they run) start, and how many of step
// k's n rows continue from it; the rest start from h0 and c0. Forward, every row of step t was a
// row of step t - 1. In reverse, the step before is t + 1, and rows from batch_sizes[t + 1] to
// batch_sizes[t] - 1 are sequences whose last step is t: they begin here.
struct PreviousRows {
  int64_t offset, count;
};
inline PreviousRows previous_rows(const LstmPackedSizes& s, int64_t k, bool reverse) {
  if (k == 0) return {0, 0};
  const int64_t t = s.step(k, reverse), before = s.step(k - 1, reverse);
  return {s.offsets[before], std::min(s.batch_sizes[before], s.batch_sizes[t])};
}

}  // namespace custom_ops
