"""The Python face of custom_ops_stable: a typed wrapper per operator, its fake kernel, and its
autograd formula, as ../../custom_ops/ops.py has for custom_ops.

custom_ops registers relu's and fused_bias_relu's autograd in C++ (csrc/autograd.cpp), with
torch::autograd::Function. That class is not part of the stable ABI, so here the formulas are
Python (`register_autograd`): a few microseconds more per call (call_cost.py measures it), and
the same gradients, computed by the library's own backward operators. Those are not themselves
differentiable: their autograd formula refuses a second derivative with an error, where PyTorch
would otherwise warn and treat them as constants (a silently wrong double backward).
"""

from __future__ import annotations

import torch
from torch import Tensor

ops = torch.ops.custom_ops_stable


def _no_double_backward(name: str):
    def backward(ctx, *grads):
        raise RuntimeError(
            f"custom_ops_stable::{name} is not differentiable: custom_ops_stable has no double "
            "backward (take the second derivative of torch.relu instead)"
        )

    torch.library.register_autograd(f"custom_ops_stable::{name}", backward)


# ---- relu --------------------------------------------------------------------------------------


def relu(x: Tensor) -> Tensor:
    """max(x, 0) elementwise; NaN stays NaN. x: any shape and strides, float32/64/16 or bfloat16.
    Returns a contiguous tensor."""
    return ops.relu.default(x)


@torch.library.register_fake("custom_ops_stable::relu")
def _(x: Tensor) -> Tensor:
    return x.new_empty(x.shape)


@torch.library.register_fake("custom_ops_stable::relu_backward")
def _(grad_y: Tensor, y: Tensor) -> Tensor:
    torch._check(grad_y.shape == y.shape, lambda: "relu_backward: grad_y and y differ in shape")
    return y.new_empty(y.shape)


def _relu_setup_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)


def _relu_backward(ctx, grad_y: Tensor) -> Tensor:
    (y,) = ctx.saved_tensors
    return ops.relu_backward.default(grad_y, y)


torch.library.register_autograd(
    "custom_ops_stable::relu", _relu_backward, setup_context=_relu_setup_context
)
_no_double_backward("relu_backward")

# ---- fused_bias_relu ---------------------------------------------------------------------------


def fused_bias_relu(x: Tensor, bias: Tensor, scale: float = 1.0) -> Tensor:
    """relu(x * scale + bias). x: (..., F), any strides; bias: (F,), same dtype and device.
    Returns a contiguous tensor of x's shape and dtype."""
    return ops.fused_bias_relu.default(x, bias, scale)


@torch.library.register_fake("custom_ops_stable::fused_bias_relu")
def _(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    torch._check(x.dim() >= 1, lambda: "fused_bias_relu: x must have at least 1 dimension")
    torch._check(
        bias.shape == (x.shape[-1],),
        lambda: f"fused_bias_relu: bias must have shape ({x.shape[-1]},), got {tuple(bias.shape)}",
    )
    return x.new_empty(x.shape)


@torch.library.register_fake("custom_ops_stable::fused_bias_relu_backward")
def _(grad_y: Tensor, y: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    return y.new_empty(y.shape), y.new_empty(y.shape[-1:])


def _fused_setup_context(ctx, inputs, output) -> None:
    _, _, scale = inputs
    ctx.scale = scale
    ctx.save_for_backward(output)


def _fused_backward(ctx, grad_y: Tensor) -> tuple[Tensor, Tensor, None]:
    (y,) = ctx.saved_tensors
    grad_x, grad_bias = ops.fused_bias_relu_backward.default(grad_y, y, ctx.scale)
    return grad_x, grad_bias, None


torch.library.register_autograd(
    "custom_ops_stable::fused_bias_relu", _fused_backward, setup_context=_fused_setup_context
)
_no_double_backward("fused_bias_relu_backward")
