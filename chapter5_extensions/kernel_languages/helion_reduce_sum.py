"""reduce_sum, the sum of all of x's elements, in Helion: a kernel of PyTorch code over tiles
writes one partial sum per tile of x, and torch.sum adds the partials (one small launch, in a
fixed order: the same bits on every run). Registered as course_helion::reduce_sum. Lesson: chapter
5, further/kernel_languages.md; tests: test_kernel_languages.py. Install: see
helion_fused_bias_relu.py.

    python chapter5_extensions/kernel_languages/helion_reduce_sum.py
"""

from __future__ import annotations

import os
import sys

import torch
from torch import Tensor

if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import helion
import helion.language as hl
import reduce_sum_contract as contract
import triton

INTERPRETED = triton.knobs.runtime.interpret


# One pinned config: tiles of 4,096 elements for 8 warps (16 float32 a thread), chosen by hand,
# not autotuned. tile.id is the tile's number, so partials[tile.id] is this tile's sum.
@helion.kernel(config=helion.Config(block_sizes=[4096], num_warps=8), static_shapes=True)
def partial_sums(x: Tensor) -> Tensor:
    (n,) = x.shape  # the op passes x flattened
    block = hl.register_block_size(n)
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    partials = torch.empty([helion.cdiv(n, block)], dtype=acc, device=x.device)
    for tile in hl.tile(n, block_size=block):
        partials[tile.id] = x[tile].to(acc).sum()
    return partials


@torch.library.custom_op("course_helion::reduce_sum", mutates_args=())
def reduce_sum(x: Tensor) -> Tensor:
    """The sum of x's elements: a 0-dim tensor of x's dtype, summed in float32 (float64 stays).
    x: any shape and strides, float32, float64, float16 or bfloat16."""
    contract.check_inputs(x)
    torch._check(
        x.is_cuda or INTERPRETED,
        lambda: (
            f"reduce_sum: x must be a CUDA tensor, got {x.device} (Helion writes Triton, which "
            "compiles for the GPU; its interpreter runs on the CPU when TRITON_INTERPRET=1 is set "
            "before triton is imported)"
        ),
    )
    if x.numel() == 0:
        return torch.zeros((), dtype=x.dtype, device=x.device)
    return partial_sums(x.contiguous().view(-1)).sum().to(x.dtype)


contract.register_fake_and_autograd(reduce_sum)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(1_000_003, device=device)
    gap = (reduce_sum(x).double() - x.double().sum()).abs().item()
    print(f"course_helion.reduce_sum on {device}: difference from a float64 sum: {gap:.1e}")
