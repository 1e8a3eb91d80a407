"""Checks for exercise ch3/max_reduce (the specification: read it before you write max_reduce.cu).

    make check EX=ch3/max_reduce

Your op must return torch.amax(x) (a 0-dim tensor of x's dtype, NaN if any element is NaN) on the
CPU and on a GPU, for every floating dtype, any shape and layout; refuse an empty tensor; and on a
GPU read x at >= 80% of copy_'s bandwidth.
"""

from __future__ import annotations

import torch
from grading import Bandwidth, expect_close, expect_error, measure_bandwidth, needs_cuda

SOURCE = "max_reduce.cu"  # the file you write, in this folder
GIVEN = ["max_reduce_op.cpp"]  # given: the op, which calls your file
LIBRARY = "ch3_max_reduce"  # its ops: torch.ops.ch3_max_reduce.max_reduce
# Bytes read per second as a fraction of copy_'s bandwidth (bytes read and written) on an H100.
# torch.sum, whose reduction reads the same bytes, reaches 99% of it at 2^28 float32 elements, and
# the chapter's sum_v6 (this exercise's two-pass design, with 16-byte loads) 98%. A maximum costs a
# comparison per element, no more than an addition; 80% leaves room for 4-byte loads, but not for
# a block per 512 elements: the chapter's sum_v3 and sum_v4, built that way, reach 33%.
BANDWIDTH_TARGET = 0.80

# The maximum is one of the inputs, so it is exact in every dtype: no tolerance.
EXACT = dict(atol=0.0, rtol=0.0)
SHAPES = [(), (1,), (7,), (3, 5, 11), (1000, 33), (2**24 + 3,)]
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.amax(x)  # also torch.max(x): NaN if any element is NaN


def random(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(shape, generator=generator, dtype=torch.float64)).to(device, dtype)


def check_float32(ops, device):
    """float32 matches torch.amax for shapes (), 1, odd and large (2^24 + 3)"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, device, seed)
        expect_close(ops.max_reduce(x), reference(x), **EXACT, what=f"shape {shape}")


def check_maximum_anywhere(ops, device):
    """the maximum is found at the first, a middle and the last of 2^24 + 3 elements"""
    n = 2**24 + 3
    base = random((n,), torch.float32, device, seed=10)
    for where in (0, n // 2 + 1, n - 1):
        x = base.clone()
        x[where] = 100.0
        expect_close(ops.max_reduce(x), reference(x), **EXACT, what=f"maximum at [{where}]")


def check_every_dtype(ops, device):
    """float64, float16 and bfloat16 match torch.amax, and the result has x's dtype"""
    for dtype in DTYPES:
        x = random((100_003,), dtype, device, seed=11)
        expect_close(ops.max_reduce(x), reference(x), **EXACT, what=str(dtype))


def check_all_negative(ops, device):
    """a tensor of negative numbers has a negative maximum (the identity of max is -inf, not 0)"""
    for dtype in DTYPES:
        x = -1 - random((300_001,), dtype, device, seed=12).abs()
        expect_close(ops.max_reduce(x), reference(x), **EXACT, what=str(dtype))


def check_infinities(ops, device):
    """-inf and inf: all -inf gives -inf, -inf is smaller than any number, inf larger"""
    inf = float("inf")
    cases = {
        "all -inf": [-inf] * 1000,
        "-inf and numbers": [-inf, -3.0, -inf, -7.5],
        "inf": [-1.0, inf, 2.0, -inf],
    }
    for what, values in cases.items():
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.tensor(values, dtype=dtype, device=device)
            expect_close(ops.max_reduce(x), reference(x), **EXACT, what=f"{what}, {dtype}")


def check_nan_anywhere(ops, device):
    """a NaN anywhere gives NaN: first, middle or last of 2^20 + 7 elements, and in every dtype"""
    n = 2**20 + 7
    base = random((n,), torch.float32, device, seed=13)
    for where in (0, n // 2, n - 1):
        x = base.clone()
        x[where] = float("nan")
        expect_close(ops.max_reduce(x), reference(x), **EXACT, what=f"NaN at [{where}]")
    for dtype in DTYPES:
        x = random((1001,), dtype, device, seed=14)
        x[500] = float("nan")
        x[700] = float("inf")
        expect_close(ops.max_reduce(x), reference(x), **EXACT, what=f"NaN and inf, {dtype}")


def check_non_contiguous_inputs(ops, device):
    """a transposed view, a strided slice and a view one element into its buffer"""
    base = random((64, 257), torch.float32, device, seed=15)
    for what, x in [("x.t()", base.t()), ("x[:, ::3]", base[:, ::3]), ("x[1:]", base.view(-1)[1:])]:
        expect_close(ops.max_reduce(x), reference(x), **EXACT, what=what)


def check_rejects_empty_tensors(ops, device):
    """an empty tensor is refused: the maximum of no elements is undefined"""
    for shape in [(0,), (3, 0)]:
        x = torch.empty(shape, device=device)
        expect_error(lambda x=x: ops.max_reduce(x), r"max_reduce: x is empty")


def check_rejects_integer_tensors(ops, device):
    """an integer tensor is refused with a message that names the op and the dtype"""
    x = torch.arange(10, device=device)
    expect_error(
        lambda: ops.max_reduce(x), r"max_reduce: x must be float32, float64, float16 or bfloat16"
    )


def check_more_than_2_31_elements(ops):
    """2^31 + 5 float16 elements on a GPU, the maximum near the end (int32 indices wrap around)"""
    needs_cuda(large=True)
    n = 2**31 + 5  # 4 GiB of float16
    x = torch.full((n,), -2.0, dtype=torch.float16, device="cuda")
    x[n - 3] = 7.0
    x[2**31 - 100] = 5.0  # a smaller maximum before 2^31, for a kernel that stops there
    expect_close(ops.max_reduce(x), torch.tensor(7.0, dtype=torch.float16, device="cuda"), **EXACT)


def benchmark(ops) -> list[Bandwidth]:
    x = torch.randn(2**28, device="cuda", dtype=torch.float32)
    # A reduction reads x and writes one number: the bytes moved are x's.
    return [
        measure_bandwidth(
            "2^28 float32",
            lambda: ops.max_reduce(x),
            bytes_moved=x.nbytes,
            target=BANDWIDTH_TARGET,
        )
    ]
