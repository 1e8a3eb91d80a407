"""reduce_sum, the sum of all of x's elements, in Triton, registered with torch.library.triton_op
as course_triton::reduce_sum: two launches, each program summing a stretch of x into one partial,
then one program adding the partials in order, so the result is the same bits on every run.
Lesson: chapter 5, further/kernel_languages.md; tests: test_kernel_languages.py.

    python chapter5_extensions/kernel_languages/triton_reduce_sum.py

Without a CUDA device the kernels run in Triton's interpreter, as triton_fused_bias_relu.py's do.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import Tensor

if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import reduce_sum_contract as contract
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

INTERPRETED = triton.knobs.runtime.interpret

# A program loads BLOCK elements at a time (8 warps: 16 float32 a thread, four 16-byte vectors),
# and there are at most PROGRAMS of them: 8 programs of 8 warps fill an H100 SM (2,048 threads), so
# 1,024 programs run at once on its 132 SMs and each streams its own stretch of x.
BLOCK = 4096
NUM_WARPS = 8
PROGRAMS = 1024


@triton.jit
def partial_sums_kernel(x_ptr, partials_ptr, numel, chunk, BLOCK: tl.constexpr):
    """Program p sums x[p * chunk : (p + 1) * chunk] into partials[p], BLOCK lanes at a time."""
    pid = tl.program_id(0)
    acc_type = partials_ptr.dtype.element_ty
    sums = tl.zeros((BLOCK,), dtype=acc_type)
    start = pid.to(tl.int64) * chunk
    end = tl.minimum(start + chunk, numel)
    while start < end:  # `while`, not range(): see triton_fused_bias_relu.py's backward
        offsets = start + tl.arange(0, BLOCK)
        sums += tl.load(x_ptr + offsets, mask=offsets < end, other=0).to(acc_type)
        start += BLOCK
    tl.store(partials_ptr + pid, tl.sum(sums, axis=0))


@triton.jit
def sum_partials_kernel(partials_ptr, out_ptr, count, BLOCK: tl.constexpr):
    """One program: the sum of count partials, always in the same order."""
    offsets = tl.arange(0, BLOCK)
    total = tl.sum(tl.load(partials_ptr + offsets, mask=offsets < count, other=0), axis=0)
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


def launcher(kernel):
    """wrap_triton(kernel) on a GPU, so torch.compile can trace the launch; the interpreter's
    kernels as they are (wrap_triton refuses them)."""
    return kernel if INTERPRETED else wrap_triton(kernel)


@triton_op("course_triton::reduce_sum", mutates_args=())
def reduce_sum(x: Tensor) -> Tensor:
    """The sum of x's elements: a 0-dim tensor of x's dtype, summed in float32 (float64 stays).
    x: any shape and strides, float32, float64, float16 or bfloat16, on a GPU (or the CPU under
    Triton's interpreter)."""
    contract.check_inputs(x)
    torch._check(
        x.is_cuda or INTERPRETED,
        lambda: (
            f"reduce_sum: x must be a CUDA tensor, got {x.device} (Triton compiles for the GPU; "
            "its interpreter runs on the CPU when TRITON_INTERPRET=1 is set before triton is "
            "imported)"
        ),
    )
    x = x.contiguous().view(-1)
    numel = x.numel()
    if numel == 0:
        return torch.zeros((), dtype=x.dtype, device=x.device)
    chunk = triton.cdiv(triton.cdiv(numel, PROGRAMS), BLOCK) * BLOCK  # whole BLOCKs a program
    programs = triton.cdiv(numel, chunk)
    partials = torch.empty(programs, dtype=contract.accumulate_dtype(x.dtype), device=x.device)
    out = torch.empty((), dtype=x.dtype, device=x.device)
    launcher(partial_sums_kernel)[(programs,)](
        x, partials, numel, chunk, BLOCK=BLOCK, num_warps=NUM_WARPS
    )
    launcher(sum_partials_kernel)[(1,)](
        partials, out, programs, BLOCK=triton.next_power_of_2(programs)
    )
    return out


contract.register_autograd(reduce_sum)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(1_000_003, device=device)
    gap = (reduce_sum(x).double() - x.double().sum()).abs().item()
    print(f"course_triton.reduce_sum on {device}: difference from a float64 sum: {gap:.1e}")
