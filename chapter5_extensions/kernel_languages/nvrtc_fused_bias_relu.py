"""fused_bias_relu's forward, y = relu(x * scale + bias), with its CUDA kernel compiled by NVRTC
inside this process (torch.cuda._compile_kernel) from fused_bias_relu_nvrtc.cu: no nvcc run, no
build step, no C++ extension. Registered with torch.library as course_nvrtc::fused_bias_relu, so
autograd, torch.compile and torch.export see one op. Lesson: chapter 5,
further/kernel_languages.md; tests: test_kernel_languages.py.

    python chapter5_extensions/kernel_languages/nvrtc_fused_bias_relu.py   # compile; a GPU: check

torch.cuda._compile_kernel is private (PyTorch 2.8 on; its arguments may change). Without a GPU,
NVRTC still compiles (for sm_90, compile_only()), which is how CI checks the kernel.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import NamedTuple

import fused_bias_relu_contract as contract
import torch
from torch import Tensor

HERE = Path(__file__).resolve().parent
SOURCE = (HERE / "fused_bias_relu_nvrtc.cu").read_text()
# The C++ name of each dtype's element type in the kernel's template.
TYPE_NAMES = {
    torch.float32: "float",
    torch.float64: "double",
    torch.float16: "__half",
    torch.bfloat16: "__nv_bfloat16",
}


def cuda_include_dirs() -> list[str]:
    """Where NVRTC finds this folder's nvrtc_common.cuh, and cuda_fp16.h and cuda_bf16.h, which
    NVRTC 13 does not carry itself: torch's pip wheel brings CUDA's headers
    (site-packages/nvidia/cu13/include); a CUDA toolkit has them in its include/ too."""
    found = []
    try:
        import nvidia  # a namespace package of torch's CUDA wheels

        found += [str(Path(p) / "cu13" / "include") for p in nvidia.__path__]
    except ImportError:
        pass
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    found.append(str(Path(cuda_home) / "include"))
    return [str(HERE), *[d for d in found if (Path(d) / "cuda_bf16.h").is_file()][:1]]


def kernel_name(dtype: torch.dtype, vec: int) -> str:
    return f"fused_bias_relu_kernel<{TYPE_NAMES[dtype]}, {vec}>"


@functools.cache
def compiled(dtype: torch.dtype, vec: int, device_index: int):
    """One NVRTC compile per (dtype, vector width, GPU), the first time it is launched: the CUBIN
    is loaded into that GPU's context. Nothing is kept on disk, so a new process compiles again."""
    with torch.cuda.device(device_index):
        return torch.cuda._compile_kernel(
            SOURCE, kernel_name(dtype, vec), cuda_include_dirs=cuda_include_dirs()
        )


def compile_only(dtype: torch.dtype, vec: int) -> bytes:
    """The CUBIN for sm_90 (the H100), without a GPU: torch's private helper behind
    _compile_kernel, which compiles but has nothing to load the result into."""
    from torch.cuda._utils import _nvrtc_compile

    cubin, _ = _nvrtc_compile(
        SOURCE, kernel_name(dtype, vec), "90", cuda_include_dirs=cuda_include_dirs()
    )
    return cubin


def check_inputs(x: Tensor, bias: Tensor) -> None:
    """The shared checks, and one of this kernel's own (the CuTe DSL op's too): its sizes are
    32-bit ints."""
    contract.check_inputs(x, bias)
    torch._check(
        x.numel() < 2**31,
        lambda: f"fused_bias_relu: at most 2^31 - 1 elements (32-bit sizes), got {x.numel()}",
    )


class LaunchShape(NamedTuple):
    vec: int  # elements a thread loads at once: 16 bytes' worth, or 1
    rows: int
    vec_cols: int  # vectors in a row
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


def vector_width(x: Tensor, bias: Tensor, y: Tensor) -> int:
    """Elements a thread moves at once: 16 bytes' worth where the row length and every address
    allow it, else one. (The CuTe DSL op chooses its version the same way.)"""
    vec = 16 // x.element_size()
    if x.shape[-1] % vec or any(t.data_ptr() % 16 for t in (x, bias, y)):
        return 1
    return vec


def launch_shape(x: Tensor, bias: Tensor, y: Tensor) -> LaunchShape:
    """The kernel's template width, its int arguments and its grid, for contiguous x, bias, y.
    (cuda_core_fused_bias_relu.py launches the same kernel the same way.)"""
    cols = x.shape[-1]
    rows = x.numel() // cols
    vec = vector_width(x, bias, y)
    vec_cols = cols // vec
    column_threads = min(32, 1 << (vec_cols - 1).bit_length())  # narrow rows: taller blocks
    block = (column_threads, 256 // column_threads, 1)
    grid = (-(-vec_cols // column_threads), min(-(-rows // block[1]), 65535), 1)
    return LaunchShape(vec, rows, vec_cols, grid, block)


@torch.library.custom_op("course_nvrtc::fused_bias_relu", mutates_args=(), device_types="cuda")
def fused_bias_relu(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    """y = relu(x * scale + bias): x (..., cols) on a GPU, any strides, float32, float64, float16
    or bfloat16; bias (cols,) of x's dtype and device. CPU tensors take the PyTorch reference."""
    check_inputs(x, bias)
    x, bias = x.contiguous(), bias.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    shape = launch_shape(x, bias, y)
    with torch.cuda.device(x.device):  # the launch goes to this device's current stream
        compiled(x.dtype, shape.vec, x.device.index)(
            grid=shape.grid,
            block=shape.block,
            args=[x, bias, y, shape.rows, shape.vec_cols, float(scale)],
        )
    return y


def cpu_kernel(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    """CPU tensors: the PyTorch reference, computed in float32 (float64 stays). The cuda.core op's
    CPU kernel too."""
    check_inputs(x, bias)
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    return torch.relu(x.to(compute) * scale + bias.to(compute)).to(x.dtype)


fused_bias_relu.register_kernel("cpu")(cpu_kernel)


contract.register_fake_and_autograd(fused_bias_relu)


def demo(op, compile_only, name: str) -> None:
    """The script's run (this file's and cuda_core_fused_bias_relu.py's): on a GPU, the op
    against torch; without one, the size of each CUBIN compiled for sm_90."""
    if torch.cuda.is_available():
        x = torch.randn(1000, 333, device="cuda")
        b = torch.randn(333, device="cuda")
        gap = (op(x, b, 0.5) - torch.relu(x * 0.5 + b)).abs().max().item()
        print(f"{name}: largest difference from torch.relu(x*s+b): {gap:.1e}")
    else:
        sizes = {
            f"{d} x{v}": len(compile_only(d, v)) for d in TYPE_NAMES for v in (1, 16 // d.itemsize)
        }
        print("no GPU: compiled for sm_90 only (bytes of CUBIN):", sizes)


if __name__ == "__main__":
    demo(fused_bias_relu, compile_only, "course_nvrtc.fused_bias_relu")
