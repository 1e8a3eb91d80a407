"""Checks for exercise ch3/leaky_relu (the specification: read it before you write leaky_relu.cu).

    make check EX=ch3/leaky_relu

Your op must match torch.nn.functional.leaky_relu(x, negative_slope) on the CPU and on a GPU, for
every floating dtype, any shape and layout, and on a GPU run at >= 55% of copy_'s bandwidth
(float32; 30% in bfloat16).
"""

from __future__ import annotations

import torch
from grading import Bandwidth, expect, expect_close, expect_error, measure_bandwidth, needs_cuda

SOURCE = "leaky_relu.cu"  # the file you write, in this folder
GIVEN = ["leaky_relu_op.cpp"]  # given: the op, which calls your file
LIBRARY = "ch3_leaky_relu"  # its ops: torch.ops.ch3_leaky_relu.leaky_relu
# A fraction of copy_'s bandwidth (reading and writing the same bytes). One thread per element
# cannot reach the floor: a million blocks of 256 threads, each thread one 4-byte (or 2-byte) load
# and store, are limited by issuing instructions and blocks, not by memory. The reference solution
# measured 79% (float32) and 48% (bfloat16) on an H100, 63% and 36% on an H200 (2026-11-23); the
# targets hold on both and catch a grid too small to cover the GPU. Exercise 2 (gelu) moves 16
# bytes per instruction.
BANDWIDTH_TARGET = {torch.float32: 0.55, torch.bfloat16: 0.30}

# Per dtype: the output is x or one product x * negative_slope, rounded once; the tolerances allow
# one rounding of the output type (bfloat16 keeps 8 significant bits, float16 11).
TOLERANCE = {
    torch.float32: dict(atol=1e-7, rtol=1e-6),
    torch.float64: dict(atol=1e-15, rtol=1e-14),
    torch.float16: dict(atol=1e-5, rtol=1e-3),
    torch.bfloat16: dict(atol=1e-5, rtol=1.6e-2),
}
SHAPES = [(0,), (1,), (7,), (3, 5, 11), (1000, 33), (2**20 + 3,)]


def reference(x: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    return torch.nn.functional.leaky_relu(x, negative_slope)


def random(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(shape, generator=generator, dtype=torch.float64)).to(device, dtype)


def check_float32(ops, device):
    """float32 matches the reference for shapes 0, 1, odd and large"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, device, seed)
        got = ops.leaky_relu(x)
        expect_close(got, reference(x), **TOLERANCE[torch.float32], what=f"shape {shape}")


def check_negative_slope(ops, device):
    """negative_slope is used, not a constant (0.2, 0 for a plain ReLU, and -0.5)"""
    x = random((1000,), torch.float32, device, seed=10)
    for slope in (0.2, 0.0, -0.5):
        got = ops.leaky_relu(x, slope)
        expect_close(got, reference(x, slope), **TOLERANCE[torch.float32], what=f"slope {slope}")


def check_float64(ops, device):
    """float64 matches the reference"""
    x = random((513, 7), torch.float64, device, seed=11)
    expect_close(ops.leaky_relu(x, 0.1), reference(x, 0.1), **TOLERANCE[torch.float64])


def check_half_types(ops, device):
    """float16 and bfloat16 match the reference (computed in float, rounded once)"""
    for dtype in (torch.float16, torch.bfloat16):
        x = random((4099,), dtype, device, seed=12)
        expect_close(ops.leaky_relu(x), reference(x), **TOLERANCE[dtype], what=str(dtype))


def check_nan_and_inf(ops, device):
    """NaN stays NaN, inf stays inf and -inf stays -inf (like torch's leaky_relu)"""
    special = [float("nan"), 1.0, float("inf"), -2.0, float("-inf"), -0.0, float("nan")]
    for dtype in (torch.float32, torch.float16):
        x = torch.tensor(special, dtype=dtype, device=device)
        expect_close(ops.leaky_relu(x), reference(x), **TOLERANCE[dtype], what=str(dtype))


def check_non_contiguous_inputs(ops, device):
    """a transposed view, a strided slice and a view one element into its buffer"""
    base = random((64, 257), torch.float32, device, seed=13)
    for what, x in [("x.t()", base.t()), ("x[:, ::3]", base[:, ::3]), ("x[1:]", base.view(-1)[1:])]:
        expect_close(ops.leaky_relu(x), reference(x), **TOLERANCE[torch.float32], what=what)


def check_input_is_left_unchanged(ops, device):
    """the input is not modified, and the output is a new tensor"""
    x = random((1025,), torch.float32, device, seed=14)
    before = x.clone()
    out = ops.leaky_relu(x)
    expect(out.data_ptr() != x.data_ptr(), "leaky_relu returned its input: it must write a new one")
    expect_close(x, before, atol=0, rtol=0, what="x after the call")


def check_rejects_integer_tensors(ops, device):
    """an integer tensor is refused with a message that names the op and the dtype"""
    x = torch.arange(-5, 5, device=device)
    expect_error(
        lambda: ops.leaky_relu(x), r"leaky_relu: x must be float32, float64, float16 or bfloat16"
    )


def check_more_than_2_31_elements(ops):
    """2^31 + 5 float16 elements on a GPU (int32 indices would wrap around)"""
    needs_cuda(large=True)
    n = 2**31 + 5  # 4 GiB of float16, and as much for the output
    x = torch.full((n,), -1.5, dtype=torch.float16, device="cuda")
    x[-7:] = torch.arange(-3, 4, dtype=torch.float16, device="cuda")
    out = ops.leaky_relu(x)
    tolerance = TOLERANCE[torch.float16]
    expect_close(out[-7:], reference(x[-7:]), **tolerance, what="the last elements")
    expect_close(out[:5], reference(x[:5]), **tolerance, what="the first elements")


def benchmark(ops) -> list[Bandwidth]:
    rows = []
    for dtype, target in BANDWIDTH_TARGET.items():
        x = torch.randn(2**28, device="cuda", dtype=dtype)
        out_bytes = x.nbytes  # leaky_relu reads x and writes a tensor of the same size
        rows.append(
            measure_bandwidth(
                f"2^28 {str(dtype).removeprefix('torch.')}",
                lambda x=x: ops.leaky_relu(x),
                bytes_moved=x.nbytes + out_bytes,
                target=target,
            )
        )
        del x
    return rows
