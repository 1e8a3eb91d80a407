// lstm_persistent.h: the recurrence of custom_ops::lstm as one cooperative kernel launch per pass
// (lstm_persistent.cu), for lstm.cu. Each returns false, having done nothing, when the pass does
// not fit (W_hh's slice and the step's operand must fit in one SM's shared memory, every block
// resident at once) or the batch is too large for it to win (lstm_persistent.cu,
// persistent_wanted); lstm.cu then runs its step loop.
#pragma once

#include <ATen/core/Tensor.h>

namespace custom_ops::cuda {

// Whether lstm_backward_persistent below will run (and not return false) at this size: the
// policy, and a backward that fits. Where it will not, lstm.cu gives even a persistent forward a
// step graph's memory, so that the backward's step loop can be replayed from a graph.
bool lstm_backward_runs_persistent(int64_t batch, int64_t hidden, at::ScalarType dtype);

// Steps 2 of lstm.cu for all t: gates (T, B, 4H) holds x_t W_ih^T on entry and the activated
// gates on exit; cs (T + 1, B, H) holds c0 in cs[0] on entry and every c_t on exit; y (T, B, H).
bool lstm_forward_persistent(at::Tensor& gates, const at::Tensor& w_hh, const at::Tensor& bias,
                             const at::Tensor& h0, at::Tensor& cs, at::Tensor& y);

// The same forward in float16 and bfloat16 with its products on tensor cores and W_hh held in
// registers (lstm_persistent_tc.cu): H a multiple of 128 up to 1024, 1 <= B <= 64, and
// custom_ops.lstm_paths(tensor_cores=...) allowing it. Returns false, having done nothing,
// otherwise.
bool lstm_forward_persistent_tc(at::Tensor& gates, const at::Tensor& w_hh, const at::Tensor& bias,
                                const at::Tensor& h0, at::Tensor& cs, at::Tensor& y);

// Step 3 of lstm.cu for all t, and dh_{-1} = dgates_0 W_hh: dh and dc (B, H) enter holding the
// gradients of h_n and c_n and leave holding those of h0 and c0; dgates (T, B, 4H) is written.
bool lstm_backward_persistent(const at::Tensor& grad_y, const at::Tensor& w_hh,
                              const at::Tensor& gates, const at::Tensor& cs, at::Tensor& dh,
                              at::Tensor& dc, at::Tensor& dgates);

}  // namespace custom_ops::cuda
