"""reduce_sum, the sum of all of x's elements, with its CUDA kernel (reduce_sum_nvrtc.cu) compiled
by NVRTC inside this process, as nvrtc_fused_bias_relu.py does for fused_bias_relu: registered as
course_nvrtc::reduce_sum. One launch: a grid that fills the GPU, each block's partial in a buffer,
the last block adding them in order. Lesson: chapter 5, further/kernel_languages.md; tests:
test_kernel_languages.py.

    python chapter5_extensions/kernel_languages/nvrtc_reduce_sum.py   # compile; a GPU: check
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import reduce_sum_contract as contract
import torch
from nvrtc_fused_bias_relu import TYPE_NAMES, cuda_include_dirs
from torch import Tensor

SOURCE = (Path(__file__).resolve().parent / "reduce_sum_nvrtc.cu").read_text()
THREADS = 512  # kSumThreads in the .cu file
UNROLL = 2  # kSumUnroll
BLOCKS_PER_SM = 4  # 4 x 512 threads: all an H100 SM holds (2,048)


def kernel_name(dtype: torch.dtype, vec: int) -> str:
    return f"sum_kernel<{TYPE_NAMES[dtype]}, {vec}>"


@functools.cache
def compiled(dtype: torch.dtype, vec: int, device_index: int):
    """One NVRTC compile per (dtype, vector width, GPU), on first use."""
    with torch.cuda.device(device_index):
        return torch.cuda._compile_kernel(
            SOURCE, kernel_name(dtype, vec), cuda_include_dirs=cuda_include_dirs()
        )


@functools.cache
def max_blocks(device_index: int) -> int:
    return BLOCKS_PER_SM * torch.cuda.get_device_properties(device_index).multi_processor_count


def compile_only(dtype: torch.dtype, vec: int) -> bytes:
    """The CUBIN for sm_90 without a GPU (see nvrtc_fused_bias_relu.compile_only)."""
    from torch.cuda._utils import _nvrtc_compile

    cubin, _ = _nvrtc_compile(
        SOURCE, kernel_name(dtype, vec), "90", cuda_include_dirs=cuda_include_dirs()
    )
    return cubin


class LaunchPlan(NamedTuple):
    vec: int  # elements a thread loads at once: 16 bytes' worth, or 1
    blocks: int
    partials: Tensor  # one per block, in the accumulating dtype (empty for one block)
    blocks_done: Tensor  # the counter the last block finds itself by, zeroed (empty for one)
    out: Tensor  # the 0-dim result


def launch_plan(x: Tensor) -> LaunchPlan:
    """The grid and the buffers of one launch, for a contiguous x (cuda_core_reduce_sum.py
    launches the same kernel the same way)."""
    vec = 1 if x.data_ptr() % 16 else 16 // x.element_size()
    blocks = max(1, min(-(-(x.numel() // vec) // (THREADS * UNROLL)), max_blocks(x.device.index)))
    acc = contract.accumulate_dtype(x.dtype)
    # The block counter (zeroed) and the partials; a single block needs neither.
    blocks_done = torch.zeros(1 if blocks > 1 else 0, dtype=torch.int32, device=x.device)
    partials = torch.empty(blocks if blocks > 1 else 0, dtype=acc, device=x.device)
    return LaunchPlan(vec, blocks, partials, blocks_done, x.new_empty(()))


def check_inputs(x: Tensor) -> None:
    contract.check_inputs(x)
    torch._check(
        x.numel() < 2**31,
        lambda: f"reduce_sum: at most 2^31 - 1 elements (32-bit sizes), got {x.numel()}",
    )


@torch.library.custom_op("course_nvrtc::reduce_sum", mutates_args=(), device_types="cuda")
def reduce_sum(x: Tensor) -> Tensor:
    """The sum of x's elements: a 0-dim tensor of x's dtype, summed in float32 (float64 stays),
    the same bits on every run. x: any shape and strides, float32, float64, float16 or bfloat16."""
    check_inputs(x)
    x = x.contiguous()
    plan = launch_plan(x)
    with torch.cuda.device(x.device):
        compiled(x.dtype, plan.vec, x.device.index)(
            grid=(plan.blocks, 1, 1),
            block=(THREADS, 1, 1),
            args=[x, x.numel(), plan.partials, plan.blocks_done, plan.out],
        )
    return plan.out


def cpu_kernel(x: Tensor) -> Tensor:
    """CPU tensors: the PyTorch reference, summed in float32 (float64 stays). The cuda.core op's
    CPU kernel too."""
    check_inputs(x)
    return x.sum(dtype=contract.accumulate_dtype(x.dtype)).to(x.dtype)


reduce_sum.register_kernel("cpu")(cpu_kernel)


contract.register_fake_and_autograd(reduce_sum)


def demo(op, compile_only, name: str) -> None:
    """The script's run (this file's and cuda_core_reduce_sum.py's): on a GPU, the op against a
    float64 sum; without one, the size of each CUBIN compiled for sm_90."""
    if torch.cuda.is_available():
        x = torch.randn(10_000_003, device="cuda")
        gap = (op(x).double() - x.double().sum()).abs().item()
        print(f"{name}: difference from a float64 sum: {gap:.1e}")
    else:
        sizes = {
            f"{d} x{v}": len(compile_only(d, v)) for d in TYPE_NAMES for v in (1, 16 // d.itemsize)
        }
        print("no GPU: compiled for sm_90 only (bytes of CUBIN):", sizes)


if __name__ == "__main__":
    demo(reduce_sum, compile_only, "course_nvrtc.reduce_sum")
