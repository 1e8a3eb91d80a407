// autograd.cpp: the backward of relu, fused_bias_relu, reduce_sum, lstm_cell and lstm, registered
// in C++ for the Autograd dispatch key. The other ops register theirs from Python
// (custom_ops/ops.py, with torch.library.register_autograd), which is simpler and as correct; what
// C++ saves is time per call: a Python formula makes every call of the op enter Python twice more
// (once to set up the context, and on the way back into the kernel), a few microseconds that a
// small tensor, or a step of a recurrent network, notices. call_cost.py measures both ways side by
// side (lesson: "What a call costs").

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <array>

#include "checks.h"

namespace custom_ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Whether autograd must see this call: grad mode is on and an input requires grad, or an input
// carries a forward-mode tangent (torch.autograd.forward_ad; Function::apply refuses those with an
// error, where the kernel alone would drop the tangent). PyTorch's own (generated) autograd
// kernels ask first and build a graph node only then. Function::apply allocates one on every call
// (the node, its edges, the context), a microsecond or more of host work that a call on tensors
// needing no gradient throws away (call_cost.py measures it). So each op's Autograd kernel below
// asks first, and otherwise goes straight to the kernel.
template <typename... Tensors>
bool records_graph(const Tensors&... inputs) {
  return (at::GradMode::is_enabled() && (inputs.requires_grad() || ...)) ||
         (inputs._fw_grad(/*level=*/0).defined() || ...);
}

// Each op's CPU, CUDA or fake kernel, reached through the op's handle (looked up once) below the
// autograd key (the guard), so that the call does not come back here.
at::Tensor relu_below_autograd(const at::Tensor& x) {
  static const auto relu = op_handle<at::Tensor(const at::Tensor&)>("custom_ops::relu");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return relu.call(x);
}

at::Tensor fused_bias_relu_below_autograd(const at::Tensor& x, const at::Tensor& bias,
                                          double scale) {
  static const auto fused = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, double)>(
      "custom_ops::fused_bias_relu");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return fused.call(x, bias, scale);
}

at::Tensor reduce_sum_below_autograd(const at::Tensor& x) {
  static const auto reduce_sum = op_handle<at::Tensor(const at::Tensor&)>("custom_ops::reduce_sum");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return reduce_sum.call(x);
}

using LstmCellOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

LstmCellOutputs lstm_cell_below_autograd(const at::Tensor& x, const at::Tensor& h,
                                         const at::Tensor& c, const at::Tensor& w_ih,
                                         const at::Tensor& w_hh, const at::Tensor& b_ih,
                                         const at::Tensor& b_hh) {
  static const auto lstm_cell = op_handle<LstmCellOutputs(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const at::Tensor&, const at::Tensor&)>("custom_ops::lstm_cell");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return lstm_cell.call(x, h, c, w_ih, w_hh, b_ih, b_hh);
}

class Relu : public torch::autograd::Function<Relu> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    at::Tensor y = relu_below_autograd(x);
    ctx->save_for_backward({y});  // the output decides the mask; the input is not needed
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto relu_backward =
        op_handle<at::Tensor(const at::Tensor&, const at::Tensor&)>("custom_ops::relu_backward");
    const at::Tensor y = ctx->get_saved_variables()[0];
    return {relu_backward.call(grad_outputs[0], y)};
  }
};

class FusedBiasRelu : public torch::autograd::Function<FusedBiasRelu> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias,
                            double scale) {
    at::Tensor y = fused_bias_relu_below_autograd(x, bias, scale);
    ctx->save_for_backward({y});
    ctx->saved_data["scale"] = scale;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto fused_backward =
        op_handle<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, double)>(
            "custom_ops::fused_bias_relu_backward");
    const at::Tensor y = ctx->get_saved_variables()[0];
    auto [grad_x, grad_bias] =
        fused_backward.call(grad_outputs[0], y, ctx->saved_data["scale"].toDouble());
    // One gradient per input, an undefined tensor for those that need none (and for scale).
    return {ctx->needs_input_grad(0) ? grad_x : at::Tensor(),
            ctx->needs_input_grad(1) ? grad_bias : at::Tensor(), at::Tensor()};
  }
};

class ReduceSum : public torch::autograd::Function<ReduceSum> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    // Symbolic sizes: under torch.compile with dynamic shapes they are symbols, not numbers.
    ctx->saved_data["shape"] = x.sym_sizes();
    return reduce_sum_below_autograd(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // Every element contributed once: each gets the whole gradient (a stride-0 view, no copy).
    return {grad_outputs[0].expand_symint(ctx->saved_data["shape"].toSymIntVector())};
  }
};

// The forward returns the gates and tanh(c_next) for the backward alone; b_ih and b_hh are
// added to the same pre-activations, so they get the same gradient.
class LstmCell : public torch::autograd::Function<LstmCell> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& h,
                               const at::Tensor& c, const at::Tensor& w_ih, const at::Tensor& w_hh,
                               const at::Tensor& b_ih, const at::Tensor& b_hh) {
    auto [h_next, c_next, gates, tanh_c] =
        lstm_cell_below_autograd(x, h, c, w_ih, w_hh, b_ih, b_hh);
    ctx->save_for_backward({x, h, c, w_ih, w_hh, gates, tanh_c});
    ctx->mark_non_differentiable({gates, tanh_c});
    // A loss that uses h_next alone (or c_next alone) leaves the other's gradient undefined;
    // materialized, it would be a (B, H) tensor of zeros, filled by a kernel and read by another.
    ctx->set_materialize_grads(false);
    return {h_next, c_next, gates, tanh_c};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto lstm_cell_backward = op_handle<
        std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
            const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
            const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
            const at::Tensor&, std::array<bool, 6>)>("custom_ops::lstm_cell_backward");
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &h = saved[1], &c = saved[2], &w_ih = saved[3],
                     &w_hh = saved[4], &gates = saved[5], &tanh_c = saved[6];
    if (!grad_outputs[0].defined() && !grad_outputs[1].defined()) return variable_list(7);
    // One zero, read through stride 0 by the kernel (which takes the gradients' strides).
    const auto or_zero = [&c](const at::Tensor& grad) {
      return grad.defined() ? grad : at::zeros({}, c.options()).expand_symint(c.sym_sizes());
    };
    const at::Tensor grad_h = or_zero(grad_outputs[0]), grad_c = or_zero(grad_outputs[1]);
    // The backward op's Autograd kernel is Python (ops.py refuses double backward there), and
    // the call would enter Python even with no graph to record: go below it unless one is.
    // Each of the op's products serves one gradient: only those asked for are computed.
    const std::array<bool, 6> output_mask = {
        ctx->needs_input_grad(0), ctx->needs_input_grad(1),
        ctx->needs_input_grad(2), ctx->needs_input_grad(3),
        ctx->needs_input_grad(4), ctx->needs_input_grad(5) || ctx->needs_input_grad(6)};
    const auto call = [&] {
      return lstm_cell_backward.call(grad_h, grad_c, x, h, c, w_ih, w_hh, gates, tanh_c,
                                     output_mask);
    };
    auto [grad_x, grad_h_prev, grad_c_prev, grad_w_ih, grad_w_hh, grad_bias] = [&] {
      if (records_graph(grad_h, grad_c, x, h, c, w_ih, w_hh)) return call();
      const at::AutoDispatchBelowADInplaceOrView below_autograd;
      return call();
    }();
    // Undefined (not computed) for the inputs that need no gradient; the bias gradient is
    // computed once, for either bias.
    return {grad_x,
            grad_h_prev,
            grad_c_prev,
            grad_w_ih,
            grad_w_hh,
            ctx->needs_input_grad(5) ? grad_bias : at::Tensor(),
            ctx->needs_input_grad(6) ? grad_bias : at::Tensor()};
  }
};

using LstmOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

LstmOutputs lstm_below_autograd(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0,
                                const at::Tensor& w_ih, const at::Tensor& w_hh,
                                const at::Tensor& b_ih, const at::Tensor& b_hh) {
  static const auto lstm = op_handle<LstmOutputs(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const at::Tensor&, const at::Tensor&)>("custom_ops::lstm");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return lstm.call(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
}

// The whole layer: y, h_n and c_n, and the gates and cell states that lstm_backward reads (marked
// non-differentiable: they exist for the backward alone).
class LstmLayer : public torch::autograd::Function<LstmLayer> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& h0,
                               const at::Tensor& c0, const at::Tensor& w_ih, const at::Tensor& w_hh,
                               const at::Tensor& b_ih, const at::Tensor& b_hh) {
    auto [y, h_n, c_n, gates, cs] = lstm_below_autograd(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
    ctx->save_for_backward({x, h0, w_ih, w_hh, y, gates, cs});
    ctx->mark_non_differentiable({gates, cs});
    // Not materialized: the gradients of gates and cs would be (T, B, 4H) and (T + 1, B, H)
    // tensors of zeros on every backward. The three that the backward reads are made below.
    ctx->set_materialize_grads(false);
    return {y, h_n, c_n, gates, cs};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto lstm_backward = op_handle<
        std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
            const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
            const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
            const at::Tensor&, const at::Tensor&)>("custom_ops::lstm_backward");
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &h0 = saved[1], &w_ih = saved[2], &w_hh = saved[3],
                     &y = saved[4], &gates = saved[5], &cs = saved[6];
    // A loss that leaves out y, h_n or c_n: zeros for it (rare, and what the kernels expect).
    const auto or_zeros = [](const at::Tensor& grad, const at::Tensor& like) {
      return grad.defined() ? grad : at::zeros_like(like);
    };
    const at::Tensor grad_y = or_zeros(grad_outputs[0], y);
    const at::Tensor grad_hn = or_zeros(grad_outputs[1], h0);
    const at::Tensor grad_cn = or_zeros(grad_outputs[2], h0);
    const auto call = [&] {
      return lstm_backward.call(grad_y, grad_hn, grad_cn, x, h0, w_ih, w_hh, y, gates, cs);
    };
    // As lstm_cell's: below the backward op's Autograd kernel unless a graph is being recorded.
    auto [grad_x, grad_h0, grad_c0, grad_w_ih, grad_w_hh, grad_bias] = [&] {
      if (records_graph(grad_y, grad_hn, grad_cn, x, h0, w_ih, w_hh)) return call();
      const at::AutoDispatchBelowADInplaceOrView below_autograd;
      return call();
    }();
    const auto kept = [&](int i, const at::Tensor& grad) {
      return ctx->needs_input_grad(i) ? grad : at::Tensor();
    };
    return {kept(0, grad_x),    kept(1, grad_h0),   kept(2, grad_c0),  kept(3, grad_w_ih),
            kept(4, grad_w_hh), kept(5, grad_bias), kept(6, grad_bias)};
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, Autograd, m) {
  m.impl("relu", [](const at::Tensor& x) {
    return records_graph(x) ? Relu::apply(x) : relu_below_autograd(x);
  });
  m.impl("fused_bias_relu", [](const at::Tensor& x, const at::Tensor& bias, double scale) {
    return records_graph(x, bias) ? FusedBiasRelu::apply(x, bias, scale)
                                  : fused_bias_relu_below_autograd(x, bias, scale);
  });
  m.impl("reduce_sum", [](const at::Tensor& x) {
    return records_graph(x) ? ReduceSum::apply(x) : reduce_sum_below_autograd(x);
  });
}

// In a block of its own because the lesson quotes the one above whole.
TORCH_LIBRARY_IMPL(custom_ops, Autograd, m) {
  m.impl("lstm_cell",
         [](const at::Tensor& x, const at::Tensor& h, const at::Tensor& c, const at::Tensor& w_ih,
            const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh) {
           if (!records_graph(x, h, c, w_ih, w_hh, b_ih, b_hh)) {
             return lstm_cell_below_autograd(x, h, c, w_ih, w_hh, b_ih, b_hh);
           }
           const variable_list out = LstmCell::apply(x, h, c, w_ih, w_hh, b_ih, b_hh);
           return LstmCellOutputs{out[0], out[1], out[2], out[3]};
         });
  m.impl("lstm",
         [](const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& w_ih,
            const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh) {
           if (!records_graph(x, h0, c0, w_ih, w_hh, b_ih, b_hh)) {
             return lstm_below_autograd(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
           }
           const variable_list out = LstmLayer::apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
           return LstmOutputs{out[0], out[1], out[2], out[3], out[4]};
         });
}

}  // namespace custom_ops
