// conv_rnn.cpp: a convolutional RNN over x (batch, time, features), on the CPU, and its backward
// through time. CUDA: csrc/cuda/conv_rnn.cu. With kernel of odd length K and r = K / 2, starting
// from h = hidden:
//
//   h_t[f] = tanh(x_t[f] + sum_k kernel[k] * h_{t-1}[f + k - r])     (0 outside [0, features))
//
// and the output stacks h_1 ... h_T, shape (batch, time, features). The kernel is (K,) or a
// conv1d weight's (1, 1, K); its gradient comes back in the same shape.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "checks.h"
#include "conv_rnn.h"

namespace custom_ops {

namespace {

int64_t check_conv_rnn_kernel(const at::Tensor& kernel, const char* op) {
  const bool conv1d_weight = kernel.dim() == 3 && kernel.size(0) == 1 && kernel.size(1) == 1;
  TORCH_CHECK((kernel.dim() == 1 || conv1d_weight) && kernel.size(-1) % 2 == 1, op,
              ": kernel must be 1-D with an odd length (centred on each feature), or a conv1d "
              "weight of shape [1, 1, K] with K odd, got ",
              kernel.sizes());
  return kernel.size(-1);
}

}  // namespace

int64_t check_conv_rnn(const at::Tensor& x, const at::Tensor& kernel, const at::Tensor& hidden) {
  const char* op = "conv_rnn";
  check_floating(x, op, "x");
  check_like(x, kernel, op, "x", "kernel");
  check_like(x, hidden, op, "x", "hidden");
  TORCH_CHECK(x.dim() == 3, op, ": x must be 3-D (batch, time, features), got ", x.sizes());
  const int64_t taps = check_conv_rnn_kernel(kernel, op);
  TORCH_CHECK(hidden.sizes() == at::IntArrayRef({x.size(0), x.size(2)}), op,
              ": hidden must have shape [", x.size(0), ", ", x.size(2), "] (batch, features), got ",
              hidden.sizes());
  return taps;
}

int64_t check_conv_rnn_backward(const at::Tensor& grad_out, const at::Tensor& out,
                                const at::Tensor& kernel, const at::Tensor& hidden) {
  const char* op = "conv_rnn_backward";
  check_floating(out, op, "out");
  check_like(out, grad_out, op, "out", "grad_out");
  check_like(out, kernel, op, "out", "kernel");
  check_like(out, hidden, op, "out", "hidden");
  TORCH_CHECK(out.dim() == 3, op, ": out must be 3-D (batch, time, features), got ", out.sizes());
  check_same_shape(out, grad_out, op, "out", "grad_out");
  const int64_t taps = check_conv_rnn_kernel(kernel, op);
  TORCH_CHECK(hidden.sizes() == at::IntArrayRef({out.size(0), out.size(2)}), op,
              ": hidden must have shape [", out.size(0), ", ", out.size(2),
              "] (batch, features), got ", hidden.sizes());
  return taps;
}

namespace {

at::Tensor conv_rnn_cpu(const at::Tensor& x_in, const at::Tensor& kernel_in,
                        const at::Tensor& hidden_in) {
  const int64_t taps = check_conv_rnn(x_in, kernel_in, hidden_in);
  // Any strides in (checks.h): the time loop reads contiguous rows.
  const at::Tensor x = x_in.contiguous(), kernel = kernel_in.contiguous(),
                   hidden = hidden_in.contiguous();
  const int64_t batch = x.size(0), time = x.size(1), features = x.size(2);
  const int64_t radius = taps / 2;
  at::Tensor out = at::empty(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "conv_rnn", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* xs = x.const_data_ptr<scalar_t>();
    const scalar_t* w = kernel.const_data_ptr<scalar_t>();
    const scalar_t* h0 = hidden.const_data_ptr<scalar_t>();
    scalar_t* ys = out.mutable_data_ptr<scalar_t>();
    // Sequences are independent: one task per batch row, the time loop inside it.
    at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> prev(features), next(features);
      for (int64_t b = begin; b < end; ++b) {
        for (int64_t f = 0; f < features; ++f) prev[f] = h0[b * features + f];
        for (int64_t t = 0; t < time; ++t) {
          const int64_t row = (b * time + t) * features;
          for (int64_t f = 0; f < features; ++f) {
            acc_t v = xs[row + f];
            for (int64_t k = 0; k < taps; ++k) {
              const int64_t src = f + k - radius;
              if (src >= 0 && src < features) v += static_cast<acc_t>(w[k]) * prev[src];
            }
            next[f] = std::tanh(v);
            ys[row + f] = static_cast<scalar_t>(next[f]);
          }
          std::swap(prev, next);
        }
      }
    });
  });
  return out;
}

// The backward through time, from the forward's output (h_t = out[:, t - 1], h_0 = hidden): with
// dz_t = (grad_out_t + dh_t) * (1 - h_t^2), the gradient of h_t's pre-activation,
//
//   grad_x_t = dz_t,   dh_{t-1}[s] = sum_k kernel[k] * dz_t[s - k + r],
//   grad_kernel[k] = sum_t sum_s dz_t[s - k + r] * h_{t-1}[s],   grad_hidden = dh_0.
//
// The step for h_t reads dz_{t+1} (the step after it, already done) at the neighbours of s, and
// h_t at s alone: dh_t and the kernel-gradient terms of both share the same reads.
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_rnn_backward_cpu(const at::Tensor& grad_out_in,
                                                                     const at::Tensor& out_in,
                                                                     const at::Tensor& kernel_in,
                                                                     const at::Tensor& hidden_in) {
  const int64_t taps = check_conv_rnn_backward(grad_out_in, out_in, kernel_in, hidden_in);
  const at::Tensor grad_out = grad_out_in.contiguous(), out = out_in.contiguous(),
                   kernel = kernel_in.contiguous(), hidden = hidden_in.contiguous();
  const int64_t batch = out.size(0), time = out.size(1), features = out.size(2);
  const int64_t radius = taps / 2;
  at::Tensor grad_x = at::empty(out.sizes(), out.options());
  at::Tensor grad_hidden = at::empty(hidden.sizes(), hidden.options());
  at::Tensor grad_kernel = at::empty(kernel.sizes(), kernel.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, out.scalar_type(), "conv_rnn_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* gy = grad_out.const_data_ptr<scalar_t>();
        const scalar_t* ys = out.const_data_ptr<scalar_t>();
        const scalar_t* w = kernel.const_data_ptr<scalar_t>();
        const scalar_t* h0 = hidden.const_data_ptr<scalar_t>();
        scalar_t* gx = grad_x.mutable_data_ptr<scalar_t>();
        scalar_t* gh0 = grad_hidden.mutable_data_ptr<scalar_t>();
        // The kernel's gradient sums over every sequence: each task writes its rows' sums here,
        // added up below in batch order, so the result does not depend on the thread count.
        std::vector<acc_t> partials(batch * taps, acc_t(0));
        at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
          std::vector<acc_t> later(features), now(features);  // dz_{t+1}, dz_t
          for (int64_t b = begin; b < end; ++b) {
            acc_t* grad_w = partials.data() + b * taps;
            std::fill(later.begin(), later.end(), acc_t(0));  // nothing after h_T
            // t = time - 1 ... 0 is h_{t+1}; t = -1 is h_0 = hidden, which only passes dh_0 on.
            for (int64_t t = time - 1; t >= -1; --t) {
              const int64_t row = (b * time + t) * features;
              for (int64_t s = 0; s < features; ++s) {
                const acc_t h = t >= 0 ? static_cast<acc_t>(ys[row + s])
                                       : static_cast<acc_t>(h0[b * features + s]);
                acc_t dh = 0;
                for (int64_t k = 0; k < taps; ++k) {
                  const int64_t dst = s - k + radius;
                  if (dst >= 0 && dst < features) {
                    dh += static_cast<acc_t>(w[k]) * later[dst];
                    grad_w[k] += later[dst] * h;
                  }
                }
                if (t < 0) {
                  gh0[b * features + s] = static_cast<scalar_t>(dh);
                  continue;
                }
                const acc_t dz = (static_cast<acc_t>(gy[row + s]) + dh) * (acc_t(1) - h * h);
                now[s] = dz;
                gx[row + s] = static_cast<scalar_t>(dz);
              }
              std::swap(later, now);
            }
          }
        });
        scalar_t* gw = grad_kernel.mutable_data_ptr<scalar_t>();
        for (int64_t k = 0; k < taps; ++k) {
          acc_t sum = 0;
          for (int64_t b = 0; b < batch; ++b) sum += partials[b * taps + k];
          gw[k] = static_cast<scalar_t>(sum);
        }
      });
  return {grad_x, grad_kernel, grad_hidden};
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) {
  m.impl("conv_rnn", &conv_rnn_cpu);
  m.impl("conv_rnn_backward", &conv_rnn_backward_cpu);
}

}  // namespace custom_ops
