"""What every way of writing fused_bias_relu in this folder shares, so that only the kernel
differs between nvrtc_fused_bias_relu.py and helion_fused_bias_relu.py: the checks before any
launch, the fake kernel, and the backward in PyTorch ops (the forward is what they compare).
Lesson: chapter 5, further/kernel_languages.md.
"""

from __future__ import annotations

import torch
from torch import Tensor

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def check_inputs(x: Tensor, bias: Tensor) -> None:
    """What the op refuses, before any launch: the message names op and argument."""
    torch._check(
        x.dtype in DTYPES,
        lambda: f"fused_bias_relu: x must be float32, float64, float16 or bfloat16, got {x.dtype}",
    )
    torch._check(
        x.dim() >= 1 and bias.shape == (x.shape[-1],),
        lambda: (
            f"fused_bias_relu: bias must have shape ({x.shape[-1] if x.dim() else '?'},), the "
            f"last dimension of x, got {tuple(bias.shape)}"
        ),
    )
    torch._check(
        bias.dtype == x.dtype and bias.device == x.device,
        lambda: (
            f"fused_bias_relu: bias must be {x.dtype} on {x.device} like x, got {bias.dtype} on "
            f"{bias.device}"
        ),
    )


def _fake(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    """Shapes only: what torch.compile and torch.export trace."""
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _setup_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)
    ctx.scale = inputs[2]


def _backward(ctx, grad_y: Tensor):
    """Zero where y <= 0, so a NaN output passes its gradient on, as custom_ops' backward does."""
    (y,) = ctx.saved_tensors
    active = torch.where(y <= 0, 0, grad_y)
    return active * ctx.scale, active.reshape(-1, y.shape[-1]).sum(0), None


def register_fake_and_autograd(op) -> None:
    """The op's fake kernel and its backward, the same for every way."""
    op.register_fake(_fake)
    op.register_autograd(_backward, setup_context=_setup_context)
