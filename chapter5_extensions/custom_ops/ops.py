"""The Python face of custom_ops: a typed wrapper per operator, its fake kernel, and its autograd.

The C++ side (csrc/ops.cpp) declares each operator's schema and registers CPU and CUDA kernels.
This file adds the two things PyTorch still needs to treat them like its own ops:

- a fake kernel (`register_fake`): the output's shape, dtype and device computed from the
  inputs' without touching data. torch.compile traces with fake tensors; without it the op
  would break the graph.
- an autograd formula (`register_autograd`): what to save in the forward and how to turn the
  output's gradient into the inputs'. The backward calls the library's own backward operators.
  relu, fused_bias_relu, reduce_sum, lstm_cell and lstm have theirs in C++ instead
  (csrc/autograd.cpp): a Python formula costs each call a few microseconds, which small tensors
  and the steps of a recurrent loop notice (call_cost.py).

The ops take tensors of any strides and return contiguous ones (csrc/checks.h says how), so the
fake kernels return contiguous tensors too: `torch.empty_like` would copy a transposed input's
strides, and torch.compile would then plan for a layout the real kernel never produces.
Under torch.autocast, the ops with several floating inputs cast them in C++ (csrc/autocast.cpp).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor

ops = torch.ops.custom_ops

# ---- relu --------------------------------------------------------------------------------------


def relu(x: Tensor) -> Tensor:
    """max(x, 0) elementwise; NaN stays NaN. x: any shape, float32/64/16 or bfloat16."""
    return ops.relu.default(x)


@torch.library.register_fake("custom_ops::relu")
def _(x: Tensor) -> Tensor:
    return x.new_empty(x.shape)


@torch.library.register_fake("custom_ops::relu_backward")
def _(grad_y: Tensor, y: Tensor) -> Tensor:
    torch._check(grad_y.shape == y.shape, lambda: "relu_backward: grad_y and y differ in shape")
    return y.new_empty(y.shape)


# ---- fused_bias_relu ---------------------------------------------------------------------------


def fused_bias_relu(x: Tensor, bias: Tensor, scale: float = 1.0) -> Tensor:
    """relu(x * scale + bias). x: (..., F), any strides; bias: (F,), same dtype and device
    (under torch.autocast both are cast to its dtype first)."""
    return ops.fused_bias_relu.default(x, bias, scale)


@torch.library.register_fake("custom_ops::fused_bias_relu")
def _(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    torch._check(x.dim() >= 1, lambda: "fused_bias_relu: x must have at least 1 dimension")
    torch._check(
        bias.shape == (x.shape[-1],),
        lambda: f"fused_bias_relu: bias must have shape ({x.shape[-1]},), got {tuple(bias.shape)}",
    )
    return x.new_empty(x.shape)


@torch.library.register_fake("custom_ops::fused_bias_relu_backward")
def _(grad_y: Tensor, y: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    return y.new_empty(y.shape), y.new_empty(y.shape[-1:])


# ---- reduce_sum --------------------------------------------------------------------------------


def reduce_sum(x: Tensor) -> Tensor:
    """The sum of all elements as a 0-dim tensor of x's dtype; deterministic on CPU and CUDA."""
    return ops.reduce_sum.default(x)


@torch.library.register_fake("custom_ops::reduce_sum")
def _(x: Tensor) -> Tensor:
    return x.new_empty(())


# ---- lstm_cell ---------------------------------------------------------------------------------


def lstm_cell(
    x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor
) -> tuple[Tensor, Tensor]:
    """One LSTM step, (h_next, c_next). x (B, I), h and c (B, H), w_ih (4H, I), w_hh (4H, H),
    b_ih and b_hh (4H,); gate order i, f, g, o as in torch.nn.LSTMCell."""
    h_next, c_next, _, _ = ops.lstm_cell.default(x, h, c, w_ih, w_hh, b_ih, b_hh)
    return h_next, c_next


@torch.library.register_fake("custom_ops::lstm_cell")
def _(x, h, c, w_ih, w_hh, b_ih, b_hh):
    torch._check(x.dim() == 2 and h.dim() == 2, lambda: "lstm_cell: x and h must be 2-D")
    batch, hidden = h.shape
    torch._check(
        w_ih.shape == (4 * hidden, x.shape[1]) and w_hh.shape == (4 * hidden, hidden),
        lambda: f"lstm_cell: w_ih and w_hh must have {4 * hidden} rows, got {tuple(w_ih.shape)}",
    )
    return (
        h.new_empty(batch, hidden),
        h.new_empty(batch, hidden),
        h.new_empty(batch, 4 * hidden),
        h.new_empty(batch, hidden),
    )


@torch.library.register_fake("custom_ops::lstm_cell_backward")
def _(grad_h, grad_c, x, h, c, w_ih, w_hh, gates, tanh_c, output_mask=(True,) * 6):
    grads = (
        x.new_empty(x.shape),
        h.new_empty(h.shape),
        c.new_empty(c.shape),
        w_ih.new_empty(w_ih.shape),
        w_hh.new_empty(w_hh.shape),
        w_ih.new_empty(w_ih.shape[0]),
    )
    return tuple(g if asked else None for g, asked in zip(grads, output_mask, strict=True))


# The autograd formula is in C++ (csrc/autograd.cpp), as relu's is: a step of a recurrent network
# is called in a loop, where a Python formula's few microseconds a call add up. It saves x, h, c,
# w_ih, w_hh and the outputs gates and tanh_c (returned for the backward only, not
# differentiable), and calls lstm_cell_backward, whose bias gradient goes to both b_ih and b_hh.

# ---- lstm: a whole layer -----------------------------------------------------------------------


def lstm(
    x: Tensor, h0: Tensor, c0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """One LSTM layer over a whole sequence, (y, h_n, c_n). x (T, B, I), time first; h0 and c0
    (B, H); w_ih (4H, I), w_hh (4H, H), b_ih and b_hh (4H,), gates i, f, g, o as in torch.nn.LSTM.
    y (T, B, H) holds h_1 .. h_T. On CUDA, float32 products use TF32 exactly when torch.nn.LSTM's
    would (torch.backends.cudnn.rnn.fp32_precision)."""
    y, h_n, c_n, _, _ = ops.lstm.default(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    return y, h_n, c_n


@contextlib.contextmanager
def lstm_paths(
    persistent: str | None = None,
    step_graphs: str | None = None,
    tensor_cores: str | None = None,
    clusters: str | None = None,
) -> Iterator[None]:
    """Within the block, the paths custom_ops::lstm takes on CUDA (tests and benchmarks use it to
    time or check one path; the CPU has one path). Each is "auto" (the measured choice),
    "always" or "never"; None leaves it as it is. The setting is the process's: other threads see
    it too, and a backward run after the block runs as the defaults say.

    persistent   the whole recurrence as one kernel launch (csrc/cuda/lstm_persistent.cu); "auto"
                 uses it at the small batches where it measured faster, "always" wherever it fits.
    step_graphs  the step loop replayed from a CUDA graph (csrc/cuda/lstm.cu); "auto" from a
                 shape's second call, where B x H <= 2^18, "always" from the first call and at
                 any size. The
                 graph's memory is then the op's y (and what autograd saves): it is reused on the
                 stream that made it once nothing references it, and record_stream does not hold
                 it back, so keep a reference while another stream reads y.
    tensor_cores the float16/bfloat16 persistent forward whose products run on tensor cores
                 (csrc/cuda/lstm_persistent_tc.cu; H a multiple of 128 up to 1024, B <= 64);
                 "auto" runs it where it was measured faster than the step loop (B <= 32 and
                 B x H <= 16384), or as `persistent` says when that is "always" or "never";
                 "always" wherever it fits, "never" leaves the CUDA-core kernel and the step
                 loop.
    clusters     within the tensor-core forward, the variant that runs as one thread-block cluster
                 and passes h_t between its blocks through distributed shared memory (H100 and
                 newer; H = 128, 256, 384 or 512; B <= 32); "auto" where it was measured faster
                 (B <= 8, or 16 at H <= 256), "always" wherever it fits, "never" leaves the
                 grid-wide variant."""
    before = ops._lstm_paths.default(
        persistent or "", step_graphs or "", tensor_cores or "", clusters or ""
    )
    try:
        yield
    finally:
        ops._lstm_paths.default(*before)


def _compute_dtype(t: Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


@torch.library.register_fake("custom_ops::lstm")
def _(x, h0, c0, w_ih, w_hh, b_ih, b_hh):
    torch._check(x.dim() == 3, lambda: "lstm: x must be 3-D (time, batch, features)")
    torch._check(w_hh.dim() == 2, lambda: "lstm: w_hh must be 2-D")
    steps, batch, _ = x.shape
    hidden = w_hh.shape[1]
    torch._check(
        w_ih.shape == (4 * hidden, x.shape[2]),
        lambda: f"lstm: w_ih must have shape [{4 * hidden}, {x.shape[2]}], got {tuple(w_ih.shape)}",
    )
    torch._check(
        h0.shape == (batch, hidden) and c0.shape == (batch, hidden),
        lambda: f"lstm: h0 and c0 must have shape [{batch}, {hidden}]",
    )
    acc = _compute_dtype(x)
    return (
        x.new_empty(steps, batch, hidden),
        x.new_empty(batch, hidden),
        x.new_empty(batch, hidden),
        x.new_empty(steps, batch, 4 * hidden),
        x.new_empty(steps + 1, batch, hidden, dtype=acc),
    )


@torch.library.register_fake("custom_ops::lstm_backward")
def _(grad_y, grad_hn, grad_cn, x, h0, w_ih, w_hh, y, gates, cs):
    return (
        x.new_empty(x.shape),
        h0.new_empty(h0.shape),
        h0.new_empty(h0.shape),
        w_ih.new_empty(w_ih.shape),
        w_hh.new_empty(w_hh.shape),
        w_ih.new_empty(w_ih.shape[0]),
    )


# lstm's autograd formula is C++ (csrc/autograd.cpp, LstmLayer), as lstm_cell's: a Python one made
# every call enter Python twice more, host time that a call of a small layer notices.


# ---- lstm_packed: a packed batch, either direction, optionally projected ------------------------


def lstm_packed(
    x: Tensor,
    batch_sizes: Tensor,
    h0: Tensor,
    c0: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor,
    b_hh: Tensor,
    w_hr: Tensor | None = None,
    reverse: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """One direction of one LSTM layer over a packed batch, (y, h_n, c_n): x (N, I) and
    batch_sizes (T,) as a PackedSequence holds them (data, and int64 sizes on the CPU, longest
    sequence first), h0 (B, P) and c0 (B, H) with B = batch_sizes[0]. Each step computes on its
    own rows only. reverse=True runs each sequence from its last element to its first (the second
    direction of a bidirectional layer). w_hr (P, H) projects h to P features (nn.LSTM's
    proj_size); w_hh is then (4H, P). y (N, P) is packed as x is; h_n and c_n are each sequence's
    state after its last step."""
    y, h_n, c_n, *_ = ops.lstm_packed.default(
        x, batch_sizes, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse
    )
    return y, h_n, c_n


@torch.library.register_fake("custom_ops::lstm_packed")
def _(x, batch_sizes, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse):
    # No shape here depends on batch_sizes' values, which a fake tensor does not have.
    torch._check(x.dim() == 2, lambda: "lstm_packed: x must be 2-D (rows, features)")
    torch._check(w_ih.dim() == 2, lambda: "lstm_packed: w_ih must be 2-D")
    rows, hidden = x.shape[0], w_ih.shape[0] // 4
    out = hidden if w_hr is None else w_hr.shape[0]
    torch._check(
        w_hh.shape == (4 * hidden, out),
        lambda: f"lstm_packed: w_hh must have shape [{4 * hidden}, {out}], got {tuple(w_hh.shape)}",
    )
    batch = h0.shape[0]
    return (
        x.new_empty(rows, out),
        x.new_empty(batch, out),
        x.new_empty(batch, hidden),
        x.new_empty(rows, 4 * hidden),
        x.new_empty(rows, hidden, dtype=_compute_dtype(x)),
        x.new_empty(rows if w_hr is not None else 0, hidden),
        x.new_empty(rows, out),
    )


@torch.library.register_fake("custom_ops::lstm_packed_backward")
def _(
    grad_y,
    grad_hn,
    grad_cn,
    x,
    batch_sizes,
    h0,
    c0,
    w_ih,
    w_hh,
    w_hr,
    reverse,
    gates,
    cs,
    r,
    h_prev,
):
    return (
        x.new_empty(x.shape),
        h0.new_empty(h0.shape),
        c0.new_empty(c0.shape),
        w_ih.new_empty(w_ih.shape),
        w_hh.new_empty(w_hh.shape),
        w_ih.new_empty(w_ih.shape[0]),
        x.new_empty(w_hr.shape if w_hr is not None else (0,)),
    )


def _lstm_packed_setup_context(ctx, inputs, output) -> None:
    x, batch_sizes, h0, c0, w_ih, w_hh, _, _, w_hr, reverse = inputs
    _, _, _, gates, cs, r, h_prev = output
    ctx.reverse = reverse
    ctx.save_for_backward(x, batch_sizes, h0, c0, w_ih, w_hh, w_hr, gates, cs, r, h_prev)
    ctx.mark_non_differentiable(gates, cs, r, h_prev)  # returned for the backward only


def _lstm_packed_backward(ctx, grad_y, grad_hn, grad_cn, *_grads_of_saved):
    x, batch_sizes, h0, c0, w_ih, w_hh, w_hr, gates, cs, r, h_prev = ctx.saved_tensors
    grads = ops.lstm_packed_backward.default(
        grad_y, grad_hn, grad_cn, x, batch_sizes, h0, c0, w_ih, w_hh, w_hr, ctx.reverse,
        gates, cs, r, h_prev,
    )  # fmt: skip
    grad_x, grad_h0, grad_c0, grad_w_ih, grad_w_hh, grad_bias, grad_w_hr = grads
    kept = (grad_x, None, grad_h0, grad_c0, grad_w_ih, grad_w_hh, grad_bias, grad_bias,
            grad_w_hr if w_hr is not None else None, None)  # fmt: skip
    return tuple(g if need else None for g, need in zip(kept, ctx.needs_input_grad, strict=True))


torch.library.register_autograd(
    "custom_ops::lstm_packed", _lstm_packed_backward, setup_context=_lstm_packed_setup_context
)

# ---- conv_rnn ----------------------------------------------------------------------------------


def conv_rnn(x: Tensor, kernel: Tensor, hidden: Tensor) -> Tensor:
    """A convolutional RNN: h_t = tanh(x_t + conv(h_{t-1}, kernel)), the convolution over
    features with zero padding, starting from h_0 = hidden. x (B, T, F), kernel (K,) with K odd
    or a conv1d weight (1, 1, K), hidden (B, F), all of one dtype and device; returns h_1 ... h_T
    as (B, T, F). Differentiable in all three: the backward runs the loop in reverse in one
    kernel (conv_rnn_backward), and the kernel's gradient has the kernel's shape."""
    return ops.conv_rnn.default(x, kernel, hidden)


def _conv_rnn_kernel_ok(kernel: Tensor) -> bool:
    shape_ok = kernel.dim() == 1 or (kernel.dim() == 3 and kernel.shape[:2] == (1, 1))
    return shape_ok and kernel.shape[-1] % 2 == 1


@torch.library.register_fake("custom_ops::conv_rnn")
def _(x: Tensor, kernel: Tensor, hidden: Tensor) -> Tensor:
    torch._check(x.dim() == 3, lambda: "conv_rnn: x must be 3-D (batch, time, features)")
    torch._check(
        _conv_rnn_kernel_ok(kernel),
        lambda: "conv_rnn: kernel must be 1-D with an odd length, or [1, 1, K] with K odd",
    )
    torch._check(
        hidden.shape == (x.shape[0], x.shape[2]),
        lambda: f"conv_rnn: hidden must have shape [{x.shape[0]}, {x.shape[2]}]",
    )
    return x.new_empty(x.shape)


@torch.library.register_fake("custom_ops::conv_rnn_backward")
def _(grad_out: Tensor, out: Tensor, kernel: Tensor, hidden: Tensor):
    torch._check(
        grad_out.shape == out.shape, lambda: "conv_rnn_backward: grad_out and out differ in shape"
    )
    return out.new_empty(out.shape), kernel.new_empty(kernel.shape), hidden.new_empty(hidden.shape)


def _conv_rnn_setup_context(ctx, inputs, output) -> None:
    _, kernel, hidden = inputs
    # tanh's derivative is 1 - h_t^2: the output is all the backward needs of the forward.
    ctx.save_for_backward(output, kernel, hidden)


def _conv_rnn_backward(ctx, grad_out):
    out, kernel, hidden = ctx.saved_tensors
    grads = ops.conv_rnn_backward.default(grad_out, out, kernel, hidden)
    return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad, strict=True))


torch.library.register_autograd(
    "custom_ops::conv_rnn", _conv_rnn_backward, setup_context=_conv_rnn_setup_context
)


# ---- no double backward: say so ----------------------------------------------------------------
# An operator without an autograd formula does not stop autograd: PyTorch warns ("This may lead
# to silently incorrect behavior") and goes on, and the gradient then depends on how the kernel
# happens to be written. These formulas turn that into an error that names the op.


def _refuse(name: str, why: str):
    def backward(ctx, *grads):
        raise RuntimeError(f"custom_ops::{name}: {why}")

    return backward


for _name in (
    "relu_backward",
    "fused_bias_relu_backward",
    "lstm_cell_backward",
    "lstm_backward",
    "lstm_packed_backward",
    "conv_rnn_backward",
):
    torch.library.register_autograd(
        f"custom_ops::{_name}",
        _refuse(
            _name,
            "double backward is not implemented (the backward kernels are not differentiable)",
        ),
    )
