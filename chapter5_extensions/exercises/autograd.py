"""Exercise ch5/autograd: the autograd formula of ch5_autograd::scaled_softsign, built from its
backward operator. Statement and hints: chapter 5's lesson, "Exercises". Write the three TODOs.
Check it: make check EX=ch5/autograd    (the checks: check_autograd.py; the ops and their kernels:
autograd_kernels.cpp)
"""

from __future__ import annotations

import torch
from torch import Tensor

ops = torch.ops.ch5_autograd


def scaled_softsign(x: Tensor, scale: Tensor) -> Tensor:
    """scale * x / (1 + |x|). x (..., F) contiguous, float32 or float64; scale (F,), same dtype."""
    return ops.scaled_softsign.default(x, scale)


# ---- given: the fake kernels (chapter 5's exercise ch5/fake is about writing these) ------------


@torch.library.register_fake("ch5_autograd::scaled_softsign")
def _(x: Tensor, scale: Tensor) -> Tensor:
    torch._check(
        scale.shape == x.shape[-1:],
        lambda: f"scaled_softsign: scale must have shape ({x.shape[-1]},)",
    )
    return torch.empty_like(x)


@torch.library.register_fake("ch5_autograd::scaled_softsign_backward")
def _(grad_y: Tensor, x: Tensor, scale: Tensor) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(scale)


# ---- the autograd formula ----------------------------------------------------------------------


# TODO 1: save on ctx what the backward needs. inputs is (x, scale), output is y. Tensors go
# through ctx.save_for_backward.
def setup_context(ctx, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
    raise NotImplementedError("ch5_autograd: setup_context is a TODO in autograd.py")


# TODO 2: from grad_y (the gradient of the loss with respect to y) return the gradients of x and
# scale, in that order, with ops.scaled_softsign_backward; None for an input that needs none
# (ctx.needs_input_grad). Mind the kernel's contract on grad_y.
def backward(ctx, grad_y: Tensor) -> tuple[Tensor | None, Tensor | None]:
    raise NotImplementedError("ch5_autograd: backward is a TODO in autograd.py")


# TODO 3: register setup_context and backward as the autograd formula of
# ch5_autograd::scaled_softsign.
