"""Checks for exercise ch3/gelu (the specification: read it before you write gelu.cu).

    make check EX=ch3/gelu

Your op must match torch.nn.functional.gelu(x, approximate="tanh") on the CPU and on a GPU, for
every floating dtype, any shape and layout, and on a GPU run at >= 85% of copy_'s bandwidth
(80% in bfloat16).
"""

from __future__ import annotations

import torch
from grading import Bandwidth, expect, expect_close, expect_error, measure_bandwidth, needs_cuda

SOURCE = "gelu.cu"  # the file you write, in this folder
GIVEN = ["gelu_op.cpp"]  # given: the op, which calls your file
LIBRARY = "ch3_gelu"  # its ops: torch.ops.ch3_gelu.gelu
# A fraction of copy_'s bandwidth (reading and writing the same bytes) on an H100: the chapter's
# v3 kernel reaches 94% for fused_bias_relu; GELU's tanh is still cheap next to a memory access.
# bfloat16 moves half the bytes per element for the same tanh: the reference solution measured
# 93% (float32) and 87% (bfloat16) on an H100 on 2026-11-23, so bfloat16's target leaves a margin.
BANDWIDTH_TARGET = {torch.float32: 0.85, torch.bfloat16: 0.80}

# Per dtype: float32 and float64 allow for tanh's last-bit differences between libraries (CUDA's
# tanhf is within 2 ulp); the half types for one rounding step of their 11 or 8 significant bits.
TOLERANCE = {
    torch.float32: dict(atol=1e-6, rtol=1e-5),
    torch.float64: dict(atol=1e-12, rtol=1e-10),
    torch.float16: dict(atol=1e-5, rtol=1e-3),
    torch.bfloat16: dict(atol=1e-5, rtol=1.6e-2),
}
SHAPES = [(0,), (1,), (7,), (3, 5, 11), (1000, 33), (2**20 + 3,)]


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh")


def random(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(shape, generator=generator, dtype=torch.float64)).to(device, dtype)


def check_float32(ops, device):
    """float32 matches the reference for shapes 0, 1, odd and large"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, device, seed)
        expect_close(ops.gelu(x), reference(x), **TOLERANCE[torch.float32], what=f"shape {shape}")


def check_float64(ops, device):
    """float64 matches the reference"""
    x = random((513, 7), torch.float64, device, seed=10)
    expect_close(ops.gelu(x), reference(x), **TOLERANCE[torch.float64])


def check_half_types(ops, device):
    """float16 and bfloat16 match the reference (computed in float, rounded once)"""
    for dtype in (torch.float16, torch.bfloat16):
        x = random((4099,), dtype, device, seed=11)
        expect_close(ops.gelu(x), reference(x), **TOLERANCE[dtype], what=str(dtype))


def check_large_magnitudes(ops, device):
    """large |x| gives x or 0, not NaN or inf (tanh saturates; exp would overflow)"""
    x = torch.tensor([-1e4, -100.0, -30.0, -5.0, 0.0, 5.0, 30.0, 100.0, 1e4], device=device)
    expect_close(ops.gelu(x), reference(x), **TOLERANCE[torch.float32])


def check_non_contiguous_and_misaligned_inputs(ops, device):
    """a transposed view, a strided slice and a view one element into its buffer"""
    base = random((64, 257), torch.float32, device, seed=12)
    for what, x in [("x.t()", base.t()), ("x[:, ::3]", base[:, ::3]), ("x[1:]", base.view(-1)[1:])]:
        expect_close(ops.gelu(x), reference(x), **TOLERANCE[torch.float32], what=what)


def check_input_is_left_unchanged(ops, device):
    """the input is not modified, and the output is a new tensor"""
    x = random((1025,), torch.float32, device, seed=13)
    before = x.clone()
    out = ops.gelu(x)
    expect(out.data_ptr() != x.data_ptr(), "gelu returned its input: it must write a new tensor")
    expect_close(x, before, atol=0, rtol=0, what="x after the call")


def check_rejects_integer_tensors(ops, device):
    """an integer tensor is refused with a message that names the op and the dtype"""
    x = torch.arange(10, device=device)
    expect_error(lambda: ops.gelu(x), r"gelu: x must be float32, float64, float16 or bfloat16")


def check_more_than_2_31_elements(ops):
    """2^31 + 5 float16 elements on a GPU (int32 indices would wrap around)"""
    needs_cuda(large=True)
    n = 2**31 + 5
    x = torch.full((n,), 1.5, dtype=torch.float16, device="cuda")
    x[-7:] = torch.arange(-3, 4, dtype=torch.float16, device="cuda")
    out = ops.gelu(x)
    expect_close(out[-7:], reference(x[-7:]), **TOLERANCE[torch.float16], what="the last elements")
    expect_close(out[:5], reference(x[:5]), **TOLERANCE[torch.float16], what="the first elements")


def benchmark(ops) -> list[Bandwidth]:
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2**28, device="cuda", dtype=dtype)
        out_bytes = x.nbytes  # gelu reads x and writes a tensor of the same size
        rows.append(
            measure_bandwidth(
                f"2^28 {str(dtype).removeprefix('torch.')}",
                lambda x=x: ops.gelu(x),
                bytes_moved=x.nbytes + out_bytes,
                target=BANDWIDTH_TARGET[dtype],
            )
        )
        del x
    return rows
