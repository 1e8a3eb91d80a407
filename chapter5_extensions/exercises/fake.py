"""Exercise ch5/fake: the fake kernel of ch5_fake::pad_to_multiple, whose output shape is computed
from the input's. Statement and hints: chapter 5's lesson, "Exercises". Write the TODO.
Check it: make check EX=ch5/fake    (the checks: check_fake.py; the op and its kernel:
fake_kernels.cpp)
"""

from __future__ import annotations

import torch
from torch import Tensor


def pad_to_multiple(x: Tensor, multiple: int) -> Tensor:
    """x of shape (..., n), any float dtype, padded with zeros at the end of its last dimension to
    (..., ceil(n / multiple) * multiple); a new contiguous tensor of x's dtype and device."""
    return torch.ops.ch5_fake.pad_to_multiple.default(x, multiple)


# TODO: the fake kernel. Refuse what the CPU kernel refuses (a 0-dim x, a multiple below 1) with
# its messages, using torch._check; then return a new empty tensor with the output's shape, x's
# dtype and device, and the kernel's strides (contiguous). Read no data, and keep the size
# arithmetic symbolic: torch.compile(dynamic=True) calls this with symbols for sizes.
@torch.library.register_fake("ch5_fake::pad_to_multiple")
def _(x: Tensor, multiple: int) -> Tensor:
    raise NotImplementedError("ch5_fake::pad_to_multiple: the fake kernel is a TODO in fake.py")
