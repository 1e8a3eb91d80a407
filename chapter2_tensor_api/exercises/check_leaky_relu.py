"""Checks for exercise ch2/leaky_relu (the specification: read it before you write leaky_relu.cpp).

    make check EX=ch2/leaky_relu

Your op must match torch.nn.functional.leaky_relu(x, negative_slope) on the CPU for every floating
dtype, any shape and any layout, return a new tensor, and refuse what it cannot compute.
"""

from __future__ import annotations

import torch
from grading import expect, expect_close, expect_error

SOURCE = "leaky_relu.cpp"  # the file you write, in this folder
LIBRARY = "ch2_leaky_relu"  # its ops: torch.ops.ch2_leaky_relu.leaky_relu

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


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(shape, generator=generator, dtype=torch.float64)).to(dtype)


def check_float32(ops):
    """float32 matches the reference for shapes 0, 1, odd and large"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, seed)
        expect_close(ops.leaky_relu(x), reference(x), **TOLERANCE[torch.float32], what=f"{shape}")


def check_negative_slope(ops):
    """negative_slope is used as given: 0.2, 0 (a ReLU), 2 and -0.5"""
    x = random((1000,), torch.float32, seed=10)
    for slope in (0.2, 0.0, 2.0, -0.5):
        got = ops.leaky_relu(x, slope)
        expect_close(got, reference(x, slope), **TOLERANCE[torch.float32], what=f"slope {slope}")


def check_float64(ops):
    """float64 matches the reference"""
    x = random((513, 7), torch.float64, seed=11)
    expect_close(ops.leaky_relu(x, 0.1), reference(x, 0.1), **TOLERANCE[torch.float64])


def check_half_types(ops):
    """float16 and bfloat16 match the reference (computed in float, rounded once)"""
    for seed, dtype in enumerate((torch.float16, torch.bfloat16)):
        x = random((4099,), dtype, seed=12 + seed)
        got = ops.leaky_relu(x, 0.3)
        expect_close(got, reference(x, 0.3), **TOLERANCE[dtype], what=str(dtype))


def check_nan_and_inf(ops):
    """NaN stays NaN, inf stays inf and -inf becomes -inf * negative_slope, as in torch"""
    special = [float("nan"), 1.0, float("inf"), -2.0, float("-inf"), -0.0, float("nan")]
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = torch.tensor(special, dtype=dtype)
        for slope in (0.01, -0.5):
            got = ops.leaky_relu(x, slope)
            expect_close(got, reference(x, slope), **TOLERANCE[dtype], what=f"{dtype}, {slope}")


def check_non_contiguous_inputs(ops):
    """a transposed view, a strided slice, a view one element into its buffer, an expanded row"""
    base = random((64, 257), torch.float32, seed=14)
    views = {
        "x.t()": base.t(),
        "x[:, ::3]": base[:, ::3],
        "x.view(-1)[1:]": base.view(-1)[1:],
        "x[0].expand(5, -1)": base[0].expand(5, -1),
    }
    for what, x in views.items():
        expect_close(ops.leaky_relu(x), reference(x), **TOLERANCE[torch.float32], what=what)


def check_input_is_left_unchanged(ops):
    """the input is not modified, and the output is a new tensor"""
    x = random((1025,), torch.float32, seed=15)
    before = x.clone()
    out = ops.leaky_relu(x)
    expect(out.data_ptr() != x.data_ptr(), "leaky_relu returned its input: write a new tensor")
    expect_close(x, before, atol=0, rtol=0, what="x after the call")


def check_rejects_integer_tensors(ops):
    """an integer tensor is refused with a message that names the op, the argument and the dtype"""
    x = torch.arange(10)
    expect_error(lambda: ops.leaky_relu(x), r"leaky_relu: x must be a floating-point tensor.*Long")


def check_rejects_tensors_not_on_the_cpu(ops):
    """a tensor on another device (here "meta", which has no data) is refused by name"""
    x = torch.empty(10, device="meta")
    expect_error(lambda: ops.leaky_relu(x), r"leaky_relu: x must be a CPU tensor, got meta")
