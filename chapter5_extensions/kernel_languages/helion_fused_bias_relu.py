"""fused_bias_relu's forward, y = relu(x * scale + bias), written in Helion, PyTorch's tile
language: the kernel is PyTorch code over tiles, and Helion writes the Triton kernel from it.
Registered with torch.library as course_helion::fused_bias_relu, as the NVRTC op is. Lesson:
chapter 5, further/kernel_languages.md; tests: test_kernel_languages.py.

    pip install --no-deps helion==1.5.0 filecheck   # not in requirements.txt: optional here
    python chapter5_extensions/kernel_languages/helion_fused_bias_relu.py

Helion 1.5.0 is the newest release that imports with torch 2.11 (1.5.1 needs names 2.11 does not
have). Without a GPU it runs under Triton's interpreter (TRITON_INTERPRET=1 before triton is
imported), slowly, as the Triton op does.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import Tensor

if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import fused_bias_relu_contract as contract
import helion
import helion.language as hl
import triton

# Whether kernels run in Triton's interpreter (CPU tensors) or compiled (CUDA tensors only).
INTERPRETED = triton.knobs.runtime.interpret


# One pinned config, so no call autotunes (a search takes minutes per shape): tiles of 8 rows by
# 256 columns, 2,048 elements for 4 warps, numbered along the rows (loop_orders [[1, 0]]: the
# column tile changes fastest), as the Triton op numbers its tiles. Chosen by hand from a sweep
# (tune_tiles.py), not by Helion's autotuner. static_shapes: a kernel per shape, as Triton
# specializes on its arguments.
@helion.kernel(
    config=helion.Config(block_sizes=[8, 256], num_warps=4, loop_orders=[[1, 0]]),
    static_shapes=True,
)
def fused_bias_relu_kernel(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    rows, cols = x.shape  # the op passes x as (rows, cols)
    y = torch.empty_like(x)
    for tile_r, tile_c in hl.tile([rows, cols]):
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        v = x[tile_r, tile_c].to(compute) * scale + bias[tile_c].to(compute)[None, :]
        y[tile_r, tile_c] = torch.where(v < 0, 0.0, v).to(x.dtype)  # NaN stays NaN
    return y


def check_inputs(x: Tensor, bias: Tensor) -> None:
    """The shared checks, and one of Triton's: CUDA tensors, unless in its interpreter."""
    contract.check_inputs(x, bias)
    torch._check(
        x.is_cuda or INTERPRETED,
        lambda: (
            f"fused_bias_relu: x must be a CUDA tensor, got {x.device} (Helion writes Triton, "
            "which compiles for the GPU; its interpreter runs on the CPU when TRITON_INTERPRET=1 "
            "is set before triton is imported)"
        ),
    )


@torch.library.custom_op("course_helion::fused_bias_relu", mutates_args=())
def fused_bias_relu(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    """y = relu(x * scale + bias): x (..., cols), any strides, float32, float64, float16 or
    bfloat16; bias (cols,) of x's dtype and device."""
    check_inputs(x, bias)
    if x.numel() == 0:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    cols = x.shape[-1]
    y = fused_bias_relu_kernel(x.contiguous().view(-1, cols), bias.contiguous(), float(scale))
    return y.view(x.shape)


contract.register_fake_and_autograd(fused_bias_relu)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(100, 333, device=device)
    b = torch.randn(333, device=device)
    gap = (fused_bias_relu(x, b, 0.5) - torch.relu(x * 0.5 + b)).abs().max().item()
    print(f"course_helion.fused_bias_relu on {device}: largest difference: {gap:.1e}")
