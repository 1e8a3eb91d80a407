// lstm.cpp: custom_ops::lstm, a whole LSTM layer over a sequence, and its backward through time,
// on the CPU. The time loop runs here in C++, never in Python. CUDA: csrc/cuda/lstm.cu, the same
// algorithm with cuBLAS called directly and one fused kernel per step.
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

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) {
  m.impl("lstm", &lstm_cpu);
  m.impl("lstm_backward", &lstm_backward_cpu);
}

}  // namespace custom_ops
