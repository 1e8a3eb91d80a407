"""Exercise ch5/autograd, reference solution: the autograd formula of
ch5_autograd::scaled_softsign, built from its backward operator. Statement: chapter 5's lesson,
"Exercises". Check it: make check EX=ch5/autograd SOLUTION=1    (the ops: autograd_kernels.cpp)
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


# TODO 1 (solved): the backward needs the inputs x and scale, not the output: save them.
# save_for_backward, not ctx.x = x: autograd then checks that they were not modified in between.
def setup_context(ctx, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
    x, scale = inputs
    ctx.save_for_backward(x, scale)


# TODO 2 (solved): one gradient per input, in the inputs' order, None where none is needed.
# grad_y is often not contiguous (the gradient of y.sum() is an expanded, stride-0 tensor) and the
# kernel refuses that: .contiguous() is free when it already is.
def backward(ctx, grad_y: Tensor) -> tuple[Tensor | None, Tensor | None]:
    x, scale = ctx.saved_tensors
    grad_x, grad_scale = ops.scaled_softsign_backward.default(grad_y.contiguous(), x, scale)
    need_x, need_scale = ctx.needs_input_grad
    return (grad_x if need_x else None, grad_scale if need_scale else None)


# TODO 3 (solved): register the two functions as the op's autograd formula.
torch.library.register_autograd(
    "ch5_autograd::scaled_softsign", backward, setup_context=setup_context
)
