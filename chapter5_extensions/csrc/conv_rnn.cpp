// conv_rnn.cpp: a convolutional RNN over x (batch, time, features), on the CPU. CUDA:
// csrc/cuda/conv_rnn.cu. With kernel of odd length K and r = K / 2, starting from h = hidden:
//
//   h_t[f] = tanh(x_t[f] + sum_k kernel[k] * h_{t-1}[f + k - r])     (0 outside [0, features))
//
// and the output stacks h_1 ... h_T, shape (batch, time, features). Forward only: no gradient.

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "checks.h"
#include "conv_rnn.h"

namespace custom_ops {

void check_conv_rnn(const at::Tensor& x, const at::Tensor& kernel, const at::Tensor& hidden) {
  const char* op = "conv_rnn";
  check_floating(x, op, "x");
  check_like(x, kernel, op, "x", "kernel");
  check_like(x, hidden, op, "x", "hidden");
  TORCH_CHECK(x.dim() == 3, op, ": x must be 3-D (batch, time, features), got ", x.sizes());
  TORCH_CHECK(kernel.dim() == 1 && kernel.size(0) % 2 == 1, op,
              ": kernel must be 1-D with an odd length (centred on each feature), got ",
              kernel.sizes());
  TORCH_CHECK(hidden.sizes() == at::IntArrayRef({x.size(0), x.size(2)}), op,
              ": hidden must have shape [", x.size(0), ", ", x.size(2), "] (batch, features), got ",
              hidden.sizes());
}

namespace {

at::Tensor conv_rnn_cpu(const at::Tensor& x_in, const at::Tensor& kernel_in,
                        const at::Tensor& hidden_in) {
  check_conv_rnn(x_in, kernel_in, hidden_in);
  // Any strides in (checks.h): the time loop reads contiguous rows.
  const at::Tensor x = x_in.contiguous(), kernel = kernel_in.contiguous(),
                   hidden = hidden_in.contiguous();
  const int64_t batch = x.size(0), time = x.size(1), features = x.size(2), taps = kernel.size(0);
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

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CPU, m) { m.impl("conv_rnn", &conv_rnn_cpu); }

}  // namespace custom_ops
