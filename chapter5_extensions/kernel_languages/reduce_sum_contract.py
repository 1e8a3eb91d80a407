"""What every way of writing reduce_sum in this folder shares (nvrtc_reduce_sum.py,
triton_reduce_sum.py, helion_reduce_sum.py), so that only the kernels differ: the checks before
any launch, the fake kernel, and the backward. reduce_sum(x) is the sum of all of x's elements, a
0-dim tensor of x's dtype, summed in float32 (float64 for float64), the same bits on every run, as
custom_ops.reduce_sum. Lesson: chapter 5, further/kernel_languages.md.
"""

from __future__ import annotations

import torch
from torch import Tensor

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def check_inputs(x: Tensor) -> None:
    """What the op refuses, before any launch: the message names op and argument."""
    torch._check(
        x.dtype in DTYPES,
        lambda: f"reduce_sum: x must be float32, float64, float16 or bfloat16, got {x.dtype}",
    )


def accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the sums are kept in: ATen's opmath type."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _fake(x: Tensor) -> Tensor:
    return x.new_empty(())


def _setup_context(ctx, inputs, output) -> None:
    (x,) = inputs
    ctx.shape = x.shape


def _backward(ctx, grad: Tensor):
    """Every element contributed once: its gradient is the output's, broadcast (a view)."""
    return grad.expand(ctx.shape)


def register_autograd(op) -> None:
    op.register_autograd(_backward, setup_context=_setup_context)


def register_fake_and_autograd(op) -> None:
    """A custom_op's fake kernel and backward (a triton_op needs no fake: it traces its kernels)."""
    op.register_fake(_fake)
    register_autograd(op)
