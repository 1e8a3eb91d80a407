"""Exercise ch5/fake, reference solution: the fake kernel of ch5_fake::pad_to_multiple, whose
output shape is computed from the input's. Statement: chapter 5's lesson, "Exercises".
Check it: make check EX=ch5/fake SOLUTION=1    (the op and its CPU kernel: fake_kernels.cpp)
"""

from __future__ import annotations

import torch
from torch import Tensor


def pad_to_multiple(x: Tensor, multiple: int) -> Tensor:
    """x of shape (..., n), any float dtype, padded with zeros at the end of its last dimension to
    (..., ceil(n / multiple) * multiple); a new contiguous tensor of x's dtype and device."""
    return torch.ops.ch5_fake.pad_to_multiple.default(x, multiple)


# TODO (solved): refuse what the kernel refuses, with its messages, then return an empty tensor of
# the output's shape. Under torch.compile(dynamic=True) n is a symbol, and
# (n + multiple - 1) // multiple stays one expression for every n, where int(n) would pin the
# graph to one size.
@torch.library.register_fake("ch5_fake::pad_to_multiple")
def _(x: Tensor, multiple: int) -> Tensor:
    torch._check(
        x.dim() >= 1,
        lambda: "pad_to_multiple: x must have at least 1 dimension, got a 0-dim tensor",
    )
    torch._check(multiple >= 1, lambda: f"pad_to_multiple: multiple must be >= 1, got {multiple}")
    n = x.shape[-1]
    padded = (n + multiple - 1) // multiple * multiple
    # new_empty: x's dtype and device, contiguous, as the kernel's output.
    return x.new_empty((*x.shape[:-1], padded))
