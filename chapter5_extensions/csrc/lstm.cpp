// lstm.cpp: custom_ops::lstm, a whole LSTM layer over a sequence, and its backward through time,
// on the CPU; then custom_ops::lstm_packed, the same over a packed batch, in either direction and
// with an optional projection (at the end of the file). The time loops run here in C++, never in
// Python. CUDA: csrc/cuda/lstm.cu, the same algorithms with cuBLAS called directly and one fused
// kernel per step.
//
// The algorithm, the same on both devices:
//   forward   1. the input projection of all T steps as ONE product: (T*B, I) x (I, 4H)
//             2. per step: gates[t] += h_{t-1} W_hh^T, then the pointwise part (activations,
//                c_t = f c_{t-1} + i g, h_t = o tanh(c_t)), which saves the activated gates
//   backward  3. per step, in reverse: the pointwise backward gives dgates[t] and the gradient
//                carried to c_{t-1}; dh_{t-1} = dgates[t] W_hh
//             4. the weight gradients as ONE product each over all steps (dW_ih = dgates^T x,
//                dW_hh = dgates^T [h_0 .. h_{T-1}]), the bias gradient as one column sum, and
//                dx = dgates W_ih as one product: none of them waits on the recurrence.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/TensorOperators.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

#include "lstm.h"

namespace custom_ops {
namespace {

LstmOut lstm_cpu(const at::Tensor& x_in, const at::Tensor& h0, const at::Tensor& c0,
                 const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& b_ih,
                 const at::Tensor& b_hh) {
  const LstmSizes s = check_lstm_inputs(x_in, h0, c0, w_ih, w_hh, b_ih, b_hh, "lstm");
  const int64_t T = s.steps, B = s.batch, I = s.input, H = s.hidden;
  // Compute in float for the half types (a no-op for float and double), as the CUDA kernel does.
  const auto acc = opmath_dtype(x_in);
  const auto dtype = x_in.scalar_type();
  const at::Tensor x = x_in.to(acc).reshape({T * B, I});
  const at::Tensor w_hh_t = w_hh.to(acc).t();

  // 1. All T input projections at once, the bias folded in: (T*B, I) x (I, 4H) + (4H,).
  at::Tensor gates =
      at::addmm(b_ih.to(acc) + b_hh.to(acc), x, w_ih.to(acc).t()).view({T, B, 4 * H});
  at::Tensor cs = at::empty({T + 1, B, H}, x.options());
  cs[0].copy_(c0);
  at::Tensor y = at::empty({T, B, H}, x_in.options());
  at::Tensor h = h0.to(acc);
  for (int64_t t = 0; t < T; ++t) {
    // 2. One step. gates[t] is a view: the activations overwrite it in place.
    at::Tensor g = gates[t];
    g.addmm_(h, w_hh_t);
    g.narrow(1, 0, 2 * H).sigmoid_();  // i and f
    g.narrow(1, 2 * H, H).tanh_();     // g
    g.narrow(1, 3 * H, H).sigmoid_();  // o
    at::Tensor c = cs[t + 1];
    at::mul_out(c, g.narrow(1, H, H), cs[t]).addcmul_(g.narrow(1, 0, H), g.narrow(1, 2 * H, H));
    y[t].copy_(g.narrow(1, 3 * H, H) * at::tanh(c));
    h = y[t].to(acc);  // the next step reads h as rounded to x's dtype, as on CUDA
  }
  at::Tensor h_n = T > 0 ? fresh(y[T - 1], dtype) : fresh(h0, dtype);
  return {y, h_n, fresh(cs[T], dtype), gates.to(dtype), cs};
}

LstmGrads lstm_backward_cpu(const at::Tensor& grad_y, const at::Tensor& grad_hn,
                            const at::Tensor& grad_cn, const at::Tensor& x_in, const at::Tensor& h0,
                            const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& y,
                            const at::Tensor& gates, const at::Tensor& cs) {
  const LstmSizes s =
      check_lstm_backward_inputs(grad_y, grad_hn, grad_cn, x_in, h0, w_ih, w_hh, y, gates, cs);
  const int64_t T = s.steps, B = s.batch, I = s.input, H = s.hidden;
  const auto acc = opmath_dtype(x_in);
  const auto dtype = x_in.scalar_type();
  const at::Tensor w_hh_a = w_hh.to(acc);
  at::Tensor dgates = at::empty({T, B, 4 * H}, cs.options());
  at::Tensor dh = grad_hn.to(acc), dc = grad_cn.to(acc);
  for (int64_t t = T - 1; t >= 0; --t) {
    // 3. One step back (chapter 4's derivation): dc collects the gradient reaching c_t.
    const at::Tensor g = gates[t].to(acc);
    const at::Tensor i = g.narrow(1, 0, H), f = g.narrow(1, H, H);
    const at::Tensor cand = g.narrow(1, 2 * H, H), o = g.narrow(1, 3 * H, H);
    const at::Tensor tc = at::tanh(cs[t + 1]);
    const at::Tensor dh_t = grad_y[t].to(acc) + dh;
    dc = dc + dh_t * o * (1 - tc * tc);
    at::Tensor dg = dgates[t];
    dg.narrow(1, 0, H).copy_(dc * cand * i * (1 - i));
    dg.narrow(1, H, H).copy_(dc * cs[t] * f * (1 - f));
    dg.narrow(1, 2 * H, H).copy_(dc * i * (1 - cand * cand));
    dg.narrow(1, 3 * H, H).copy_(dh_t * tc * o * (1 - o));
    dc = dc * f;
    dh = at::mm(dg, w_hh_a);
  }
  // 4. Everything that does not depend on the recurrence, as single large products.
  const at::Tensor dg2 = dgates.view({T * B, 4 * H});
  const at::Tensor x = x_in.to(acc).reshape({T * B, I});
  const at::Tensor h_prev =  // h_0 .. h_{T-1}, the inputs of the recurrent product
      T == 0
          ? at::zeros({0, H}, x.options())
          : at::cat({h0.to(acc).unsqueeze(0), y.narrow(0, 0, T - 1).to(acc)}).reshape({T * B, H});
  return {at::mm(dg2, w_ih.to(acc)).view({T, B, I}).to(dtype),
          fresh(dh, dtype),
          fresh(dc, dtype),
          at::mm(dg2.t(), x).to(dtype),
          at::mm(dg2.t(), h_prev).to(dtype),
          dg2.sum(0).to(dtype)};
}

// ---- lstm_packed: a packed batch, either direction, optionally projected (csrc/lstm.h) ----------
// The same steps, on the rows each step has. h and c hold every sequence's state, (B, P) and
// (B, H): step t reads and writes their first batch_sizes[t] rows, and a row that takes no part
// keeps its state, which is how a sequence that has ended keeps its h_n and one that has not begun
// (in reverse) keeps h0.

LstmPackedOut lstm_packed_cpu(const at::Tensor& x_in, const at::Tensor& batch_sizes,
                              const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& w_ih,
                              const at::Tensor& w_hh, const at::Tensor& b_ih,
                              const at::Tensor& b_hh, const std::optional<at::Tensor>& w_hr,
                              bool reverse) {
  const char* op = "lstm_packed";
  const LstmPackedSizes s =
      check_lstm_packed_inputs(x_in, batch_sizes, h0, c0, w_ih, w_hh, w_hr, op);
  check_lstm_bias(x_in, b_ih, b_hh, s.hidden, op);
  const int64_t H = s.hidden;
  const auto acc = opmath_dtype(x_in);
  const auto dtype = x_in.scalar_type();
  const at::Tensor x = x_in.to(acc);
  const at::Tensor w_hh_t = w_hh.to(acc).t();
  at::Tensor gates = at::addmm(b_ih.to(acc) + b_hh.to(acc), x, w_ih.to(acc).t());  // (N, 4H)
  at::Tensor cs = at::empty({s.rows, H}, x.options());
  at::Tensor r = at::empty({w_hr ? s.rows : 0, H}, x_in.options());
  at::Tensor y = at::empty({s.rows, s.out}, x_in.options());
  at::Tensor h_prev = at::empty({s.rows, s.out}, x_in.options());  // the h each step started from
  at::Tensor h = h0.to(acc, /*non_blocking=*/false, /*copy=*/true);
  at::Tensor c = c0.to(acc, /*non_blocking=*/false, /*copy=*/true);
  for (int64_t k = 0; k < s.steps; ++k) {
    const int64_t t = s.step(k, reverse), n = s.batch_sizes[t], first = s.offsets[t];
    h_prev.narrow(0, first, n).copy_(h.narrow(0, 0, n));
    at::Tensor g = gates.narrow(0, first, n);
    g.addmm_(h.narrow(0, 0, n), w_hh_t);
    g.narrow(1, 0, 2 * H).sigmoid_();  // i and f
    g.narrow(1, 2 * H, H).tanh_();     // g
    g.narrow(1, 3 * H, H).sigmoid_();  // o
    at::Tensor c_t = cs.narrow(0, first, n);
    at::mul_out(c_t, g.narrow(1, H, H), c.narrow(0, 0, n))
        .addcmul_(g.narrow(1, 0, H), g.narrow(1, 2 * H, H));
    c.narrow(0, 0, n).copy_(c_t);
    at::Tensor h_t = g.narrow(1, 3 * H, H) * at::tanh(c_t);
    if (w_hr) {  // r rounded to x's dtype, as CUDA's product reads it
      r.narrow(0, first, n).copy_(h_t);
      h_t = at::mm(r.narrow(0, first, n).to(acc), w_hr->to(acc).t());
    }
    y.narrow(0, first, n).copy_(h_t);
    h.narrow(0, 0, n).copy_(y.narrow(0, first, n));  // as rounded to x's dtype, as on CUDA
  }
  return {y, fresh(h, dtype), fresh(c, dtype), gates.to(dtype), cs, r, h_prev};
}

LstmPackedGrads lstm_packed_backward_cpu(const at::Tensor& grad_y, const at::Tensor& grad_hn,
                                         const at::Tensor& grad_cn, const at::Tensor& x_in,
                                         const at::Tensor& batch_sizes, const at::Tensor& h0,
                                         const at::Tensor& c0, const at::Tensor& w_ih,
                                         const at::Tensor& w_hh,
                                         const std::optional<at::Tensor>& w_hr, bool reverse,
                                         const at::Tensor& gates, const at::Tensor& cs,
                                         const at::Tensor& r, const at::Tensor& h_prev) {
  const char* op = "lstm_packed_backward";
  const LstmPackedSizes s =
      check_lstm_packed_inputs(x_in, batch_sizes, h0, c0, w_ih, w_hh, w_hr, op);
  check_lstm_packed_saved(s, x_in, grad_y, grad_hn, grad_cn, gates, cs, r, h_prev, w_hr.has_value(),
                          op);
  const int64_t H = s.hidden;
  const auto acc = opmath_dtype(x_in);
  const auto dtype = x_in.scalar_type();
  const at::Tensor w_hh_a = w_hh.to(acc), c0_a = c0.to(acc);
  at::Tensor dgates = at::empty({s.rows, 4 * H}, cs.options());
  at::Tensor dh_all = at::empty({w_hr ? s.rows : 0, s.out}, cs.options());  // for dW_hr
  // dh and dc: the gradient reaching each sequence's current h and c, as the loop walks back.
  at::Tensor dh = grad_hn.to(acc, false, true), dc = grad_cn.to(acc, false, true);
  for (int64_t k = s.steps - 1; k >= 0; --k) {
    const int64_t t = s.step(k, reverse), n = s.batch_sizes[t], first = s.offsets[t];
    const PreviousRows prev = previous_rows(s, k, reverse);
    // c before this step: the previous step's rows, then c0 for the rows that begin here.
    const at::Tensor c_prev = at::cat(
        {cs.narrow(0, prev.offset, prev.count), c0_a.narrow(0, prev.count, n - prev.count)});
    at::Tensor dh_t = grad_y.narrow(0, first, n).to(acc) + dh.narrow(0, 0, n);
    if (w_hr) {
      dh_all.narrow(0, first, n).copy_(dh_t);
      dh_t = at::mm(dh_t, w_hr->to(acc));  // the gradient reaching r = o * tanh(c)
    }
    const at::Tensor g = gates.narrow(0, first, n).to(acc);
    const at::Tensor i = g.narrow(1, 0, H), f = g.narrow(1, H, H);
    const at::Tensor cand = g.narrow(1, 2 * H, H), o_gate = g.narrow(1, 3 * H, H);
    const at::Tensor tc = at::tanh(cs.narrow(0, first, n));
    const at::Tensor dc_t = dc.narrow(0, 0, n) + dh_t * o_gate * (1 - tc * tc);
    at::Tensor dg = dgates.narrow(0, first, n);
    dg.narrow(1, 0, H).copy_(dc_t * cand * i * (1 - i));
    dg.narrow(1, H, H).copy_(dc_t * c_prev * f * (1 - f));
    dg.narrow(1, 2 * H, H).copy_(dc_t * i * (1 - cand * cand));
    dg.narrow(1, 3 * H, H).copy_(dh_t * tc * o_gate * (1 - o_gate));
    dc.narrow(0, 0, n).copy_(dc_t * f);
    dh.narrow(0, 0, n).copy_(at::mm(dg, w_hh_a));
  }
  const at::Tensor x = x_in.to(acc);
  return {at::mm(dgates, w_ih.to(acc)).to(dtype),
          fresh(dh, dtype),
          fresh(dc, dtype),
          at::mm(dgates.t(), x).to(dtype),
          at::mm(dgates.t(), h_prev.to(acc)).to(dtype),
          dgates.sum(0).to(dtype),
          w_hr ? at::mm(dh_all.t(), r.to(acc)).to(dtype) : at::empty({0}, x_in.options())};
}

}  // namespace

LstmPaths& lstm_paths() {
  static LstmPaths* paths = [] {
    auto* p = new LstmPaths;  // never deleted: CUDA calls may read it while the process exits
    const char* v = std::getenv("CUSTOM_OPS_LSTM_PERSISTENT");  // once, when the library loads
    if (v != nullptr && std::strcmp(v, "1") == 0) p->persistent = PathChoice::kAlways;
    if (v != nullptr && std::strcmp(v, "0") == 0) p->persistent = PathChoice::kNever;
    return p;
  }();
  return *paths;
}

std::vector<std::string> set_lstm_paths(std::string persistent, std::string step_graphs,
                                        std::string tensor_cores, std::string clusters) {
  static const char* const names[] = {"auto", "always", "never"};
  auto parse = [](const std::string& name, const char* argument) -> PathChoice {
    for (int i = 0; i < 3; ++i) {
      if (name == names[i]) return static_cast<PathChoice>(i);
    }
    TORCH_CHECK(false, "_lstm_paths: ", argument,
                " must be \"auto\", \"always\" or \"never\", got \"", name, "\"");
    return PathChoice::kAuto;
  };
  LstmPaths& paths = lstm_paths();
  std::vector<std::string> before = {names[static_cast<int>(paths.persistent.load())],
                                     names[static_cast<int>(paths.step_graphs.load())],
                                     names[static_cast<int>(paths.tensor_cores.load())],
                                     names[static_cast<int>(paths.clusters.load())]};
  // All parsed before any is set: a bad later argument changes nothing.
  const auto p = persistent.empty() ? paths.persistent.load() : parse(persistent, "persistent");
  const auto g = step_graphs.empty() ? paths.step_graphs.load() : parse(step_graphs, "step_graphs");
  const auto tc =
      tensor_cores.empty() ? paths.tensor_cores.load() : parse(tensor_cores, "tensor_cores");
  const auto cl = clusters.empty() ? paths.clusters.load() : parse(clusters, "clusters");
  paths.persistent = p;
  paths.step_graphs = g;
  paths.tensor_cores = tc;
  paths.clusters = cl;
  return before;
}

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) {
  m.impl("lstm", &lstm_cpu);
  m.impl("lstm_backward", &lstm_backward_cpu);
  m.impl("lstm_packed", &lstm_packed_cpu);
  m.impl("lstm_packed_backward", &lstm_packed_backward_cpu);
}

}  // namespace custom_ops
